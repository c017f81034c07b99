package service

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestExitStatusString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		st     ExitStatus
		want   string
		failed bool
	}{
		{ExitStatus{Known: true}, "exit code 0", false},
		{ExitStatus{Known: true, Code: 3}, "exit code 3", true},
		{ExitStatus{Known: true, Code: -1, Signal: "terminated"}, "killed by signal terminated", true},
		{ExitStatus{Known: true, Code: -1, Signal: "killed", OOMKilled: true, MemoryLimit: 64 << 20}, "killed by signal killed (out of memory: limit 64Mi)", true},
		{ExitStatus{Known: true, Code: -1, Signal: "killed", OOMKilled: true}, "killed by signal killed (out of memory)", true},
		{ExitStatus{}, "exited (status unknown: adopted process)", true},
		{ExitStatus{OOMKilled: true, MemoryLimit: 1536 << 10}, "killed (out of memory: limit 1536Ki; status otherwise unknown: adopted process)", true},
	} {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.st.String())
			assert.Equal(t, tc.failed, tc.st.Failed())
		})
	}
}

func TestInvalidErrorIs(t *testing.T) {
	err := Invalidf("x: %w", os.ErrNotExist)
	assert.True(t, errors.Is(err, ErrInvalidInstance))
	assert.True(t, errors.Is(err, os.ErrNotExist))
	assert.Equal(t, "x: file does not exist", err.Error())
}
