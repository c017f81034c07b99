package service_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/applier/service/container"
	"github.com/tend-dev/tend/applier/service/process"
	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/internal/testkit/testnode"
)

// The records in testdata/records were written by tend before runtimes
// registered by kind (copied from what its supervisor wrote): they carry
// no kind, and each holds a process's or a container's fields. An agent
// upgraded over running services must adopt them, not restart them.

// oldRecord reads testdata/records/name as a JSON object.
func oldRecord(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "records", name))
	require.NoError(t, err)
	var rec map[string]any
	require.NoError(t, json.Unmarshal(b, &rec))
	return rec
}

func writeRecord(t *testing.T, stateDir, service string, replica int, rec map[string]any) string {
	t.Helper()
	dir := filepath.Join(stateDir, "services", service)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	b, err := json.MarshalIndent(rec, "", "  ")
	require.NoError(t, err)
	path := filepath.Join(dir, strconv.Itoa(replica)+".json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

func TestOldProcessRecordIsAdopted(t *testing.T) {
	// A real process in its own session, as the process runtime starts
	// one, stands for the instance the old tend left running.
	cmd := exec.Command("sleep", "1h")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
	require.NoError(t, err)
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	start, err := strconv.ParseUint(fields[19], 10, 64) // field 22
	require.NoError(t, err)
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	require.NoError(t, err)

	rec := oldRecord(t, "process.json")
	proc := rec["proc"].(map[string]any)
	proc["pid"], proc["startTime"] = cmd.Process.Pid, start
	rec["bootID"] = strings.TrimSpace(string(boot))
	dir := t.TempDir()
	instance := rec["instance"].(map[string]any)
	instance["LogFile"] = filepath.Join(dir, "logs", "infer", "0.log")
	path := writeRecord(t, dir, "infer", 0, rec)

	service.SetRestartBackoff(t, backoff.Exponential{Initial: time.Millisecond, Max: time.Millisecond})
	sup := service.NewSupervisor(dir, service.RuntimesOf(process.New(testnode.CgroupParent, nil)), nil)
	restarted := make(chan string, 1)
	sup.OnRestart(func(s string) { restarted <- s })
	require.NoError(t, sup.Start(context.Background()))
	defer func() {
		require.NoError(t, sup.Halt(context.Background(), "infer", 0, time.Second))
		sup.Stop()
	}()
	insts, err := sup.Instances("infer")
	require.NoError(t, err)
	require.Len(t, insts, 1)
	got := insts[0]
	require.True(t, got.Alive, "the process the old record names is adopted")
	require.Equal(t, cmd.Process.Pid, got.PID)
	require.Equal(t, "sha256:p", got.SpecHash)
	require.Equal(t, 2, got.Restarts)
	require.Equal(t, "no cgroup", got.Limits)
	require.Equal(t, map[string]string{"file/etc/x": "sha256:1"}, got.Inputs)
	require.Empty(t, got.Container)

	// Its exit is seen through the recovered handle, it is started again
	// from the old record's spec, and its record is written by this tend:
	// the same instance fields, plus its kind.
	require.NoError(t, syscall.Kill(cmd.Process.Pid, syscall.SIGKILL))
	_, _ = cmd.Process.Wait()
	select {
	case s := <-restarted:
		require.Equal(t, "infer", s)
	case <-time.After(waitFor):
		t.Fatal("the exit of the adopted process was not seen")
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var now map[string]any
	require.NoError(t, json.Unmarshal(b, &now))
	require.Equal(t, "process", now["kind"])
	nowInstance := now["instance"].(map[string]any)
	require.NotEqual(t, instance["Invocation"], nowInstance["Invocation"], "a new start, a new invocation")
	delete(instance, "Invocation")
	delete(nowInstance, "Invocation")
	require.Equal(t, instance, nowInstance, "the instance's JSON has the fields the old tend wrote")
	require.Contains(t, now["proc"], "pid")
	require.Contains(t, now["proc"], "startTime")
	insts, err = sup.Instances("infer")
	require.NoError(t, err)
	require.True(t, insts[0].Alive)
	require.Equal(t, 3, insts[0].Restarts)
	require.Equal(t, "exited (status unknown: adopted process)", insts[0].LastExit)
}

func TestOldContainerRecordIsReadAsAContainer(t *testing.T) {
	dir := t.TempDir()
	writeRecord(t, dir, "triton", 1, oldRecord(t, "container.json"))
	rt, err := container.New(container.Options{Host: "unix://" + filepath.Join(dir, "no-engine.sock")})
	require.NoError(t, err)
	defer rt.Close()
	sup := service.NewSupervisor(dir, service.RuntimesOf(process.New(testnode.CgroupParent, nil), rt), nil)
	insts, err := sup.Instances("triton")
	require.NoError(t, err)
	require.Len(t, insts, 1)
	require.Equal(t, 1, insts[0].Replica)
	require.Equal(t, "sha256:c", insts[0].SpecHash)
	require.Equal(t, "registry.local:5000/infer/triton@sha256:"+strings.Repeat("0", 63)+"1", insts[0].Image,
		"decoded by the container runtime")
	require.False(t, insts[0].Alive, "no engine answers: not alive")

	// On a node without the container runtime the record stays readable.
	sup = service.NewSupervisor(dir, service.RuntimesOf(process.New(testnode.CgroupParent, nil)), nil)
	insts, err = sup.Instances("triton")
	require.NoError(t, err)
	require.Len(t, insts, 1)
	require.False(t, insts[0].Alive)
}
