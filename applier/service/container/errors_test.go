package container_test

import (
	"errors"

	"github.com/tend-dev/tend/applier/service"
)

func errorsIsInvalid(err error) bool { return errors.Is(err, service.ErrInvalidInstance) }
