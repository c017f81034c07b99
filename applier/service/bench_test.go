package service_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/applier/service/process"
	"github.com/tend-dev/tend/internal/testkit/testnode"
	"github.com/tend-dev/tend/internal/testkit/testserver"
	"github.com/tend-dev/tend/manifest"
)

// BenchmarkProcessKillToServing: an agent's supervisor watching process
// services (svcprog serving HTTP); each iteration kills the main process
// of a service of its own (so no restart backoff has grown) with SIGKILL
// and waits until its port accepts a connection again (p50_serving_ms,
// the supervisor's first-restart delay of 100 ms included). Side by
// side, in the same iteration, the floor: the same binary under a shell
// loop that starts it again at once, `until svcprog -listen ADDR; do :;
// done`, killed the same way (p50_until_serving_ms); ratio is tend's
// median over the loop's.
func BenchmarkProcessKillToServing(b *testing.B) {
	prog := serviceProgram(b)
	n := testnode.New(b, testAllow)
	n.AllowEmpty = true
	n.Sup = service.NewSupervisor(n.StateDir, service.RuntimesOf(process.New(testnode.CgroupParent, nil)), nil)
	if err := n.Sup.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	ports := make([]string, 2*b.N)
	svcs := make([]manifest.Service, b.N)
	for i := range ports {
		ports[i] = testserver.FreeAddr(b)
	}
	for i := range svcs {
		svcs[i] = manifest.Service{Name: fmt.Sprintf("web%d", i), Command: []string{prog, "-listen", ports[i]}, Replicas: replicas(1)}
	}
	b.Cleanup(func() {
		n.Sup.Stop()
		for _, s := range svcs {
			_ = n.Sup.Halt(context.Background(), s.Name, 0, 0)
		}
	})
	n.Reconcile(n.Declare(manifest.DeviceSpec{Services: svcs}), "rev")
	loops := make([]*exec.Cmd, b.N)
	for i := range loops {
		loops[i] = exec.Command("sh", "-c", "until "+prog+" -listen "+ports[b.N+i]+" >/dev/null; do :; done")
		loops[i].SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := loops[i].Start(); err != nil {
			b.Fatal(err)
		}
		sh := loops[i]
		b.Cleanup(func() {
			_ = syscallKill(-sh.Process.Pid) // the loop and what it runs
			_ = sh.Wait()
		})
	}
	var tend, floor []time.Duration
	b.ResetTimer()
	for i := range b.N {
		testserver.WaitServing(b, ports[i], false)
		recs, err := n.Sup.Records(svcs[i].Name)
		if err != nil || len(recs) != 1 || !recs[0].Alive {
			b.Fatalf("%s not running: %v %+v", svcs[i].Name, err, recs)
		}
		t0 := time.Now()
		if err := syscallKill(recs[0].PID); err != nil {
			b.Fatal(err)
		}
		testserver.WaitServing(b, ports[i], true)
		tend = append(tend, time.Since(t0))

		testserver.WaitServing(b, ports[b.N+i], false)
		pid := childOf(loops[i].Process.Pid)
		if pid <= 0 {
			b.Fatal("the shell loop runs no svcprog")
		}
		t0 = time.Now()
		if err := syscallKill(pid); err != nil {
			b.Fatal(err)
		}
		testserver.WaitServing(b, ports[b.N+i], true)
		floor = append(floor, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(median(tend), "p50_serving_ms")
	b.ReportMetric(median(floor), "p50_until_serving_ms")
	b.ReportMetric(median(tend)/median(floor), "ratio")
}

// median is the median of d in milliseconds.
func median(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)/2].Microseconds()) / 1000
}

// childOf is the first child of process pid, 0 when it has none.
func childOf(pid int) int {
	s := strconv.Itoa(pid)
	raw, err := os.ReadFile("/proc/" + s + "/task/" + s + "/children")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0
	}
	c, _ := strconv.Atoi(f[0])
	return c
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
