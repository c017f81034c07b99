package source_test

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/source"
)

func TestRefuse(t *testing.T) {
	err := source.Refuse(source.ErrRewind, fs.ErrNotExist, "target %s is older", "0123456789ab")
	require.Equal(t, "target 0123456789ab is older", err.Error(), "neither the kind nor the cause is added to the message")
	require.ErrorIs(t, err, source.ErrRefused)
	require.ErrorIs(t, err, source.ErrRewind)
	require.ErrorIs(t, err, fs.ErrNotExist, "the cause stays in the chain")
	require.NotErrorIs(t, err, source.ErrQuarantined)

	plain := source.Refuse(source.ErrQuarantined, nil, "rolled back")
	require.ErrorIs(t, plain, source.ErrRefused)
	require.ErrorIs(t, plain, source.ErrQuarantined)
	require.NotErrorIs(t, errors.New("connection refused"), source.ErrRefused)
}
