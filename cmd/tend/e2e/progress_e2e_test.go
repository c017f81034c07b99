package e2e

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/internal/testkit/testpty"
)

// tendOnTerminal runs the binary with its stderr on a pseudo-terminal and
// returns stdout, what the terminal received and the exit code.
func tendOnTerminal(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ptm, tty := testpty.Open(t)
	cmd := exec.Command(tendBin, args...)
	cmd.Env = append(os.Environ(), "TEND_CONFIG=")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	require.NoError(t, cmd.Start())
	tty.Close() // the child has it: reading ends when the child exits
	var screen bytes.Buffer
	_, err := io.Copy(&screen, ptm)
	if !errors.Is(err, syscall.EIO) { // the other end closed
		require.NoError(t, err)
	}
	err = cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), screen.String(), code
}

// tend apply draws the pull of a model on a terminal, and nothing of it
// when its stderr is not one.
func TestApplyShowsPullProgressOnATerminal(t *testing.T) {
	reg := testoci.Start(t)
	weights := bytes.Repeat([]byte("w"), 3<<20)
	reg.PushFiles(t, "models/detector:v8", map[string][]byte{"model.onnx": weights, "labels.txt": []byte("person\n")})
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", distDevice(reg.Host+"/models/detector:v8"))
	repo.Commit("cam-017")

	tty := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
	_, screen, code := tendOnTerminal(t, append([]string{"apply"}, tty.flags...)...)
	require.Equal(t, 0, code, screen)
	m := regexp.MustCompile(`\rpulling model/detector  (\S+ \S+) / (\S+ \S+) \(100%\)`).FindStringSubmatch(screen)
	require.NotNil(t, m, "no finished pull on the terminal:\n%q", screen)
	require.Equal(t, m[1], m[2])
	require.Equal(t, printable.HumanBytes(int64(len(weights))), m[1], "the bytes of the model's blobs")
	require.Regexp(t, `\r\x1b\[K[^\n]*msg="model downloaded"`, screen, "the line is cleared before the next log")

	redirected := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
	_, errOut, code := redirected.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, `msg="model downloaded"`)
	require.NotContains(t, errOut, "pulling")
	require.NotContains(t, errOut, "\r")
}
