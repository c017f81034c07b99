// Command svc is the service the exec runtime's tests start: each flag
// makes it do one thing a real service might, in the order listed.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM")
	waitCgroup := flag.String("wait-cgroup", "", "wait until /proc/self/cgroup names this cgroup")
	grandchild := flag.String("grandchild", "", "start a grandchild in the same process group (it ignores SIGTERM and sleeps) and write its pid to this file")
	printInfo := flag.Bool("print", false, "print args, env, working dir and ids as JSON on stdout")
	alloc := flag.Int("alloc", 0, "allocate and touch this many MiB")
	ready := flag.String("ready", "", "create this file once set up")
	spam := flag.Duration("spam", 0, "print numbered lines on stdout for this long")
	sleep := flag.Duration("sleep", 0, "sleep this long")
	code := flag.Int("exit", 0, "exit with this code")
	flag.Parse()

	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if *waitCgroup != "" {
		deadline := time.Now().Add(5 * time.Second)
		for {
			b, _ := os.ReadFile("/proc/self/cgroup")
			if strings.Contains(string(b), *waitCgroup) {
				break
			}
			if time.Now().After(deadline) {
				fail("not moved into cgroup %s: %s", *waitCgroup, b)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if *grandchild != "" {
		self, _ := os.Executable()
		cmd := exec.Command(self, "-ignore-term", "-sleep", "1h")
		if err := cmd.Start(); err != nil {
			fail("start grandchild: %v", err)
		}
		if err := os.WriteFile(*grandchild, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			fail("%v", err)
		}
	}
	if *printInfo {
		wd, _ := os.Getwd()
		groups, _ := os.Getgroups()
		env := os.Environ()
		slices.Sort(env)
		out, _ := json.Marshal(map[string]any{
			"args": os.Args, "env": env, "cwd": wd,
			"uid": os.Getuid(), "gid": os.Getgid(), "groups": groups,
		})
		fmt.Println(string(out))
	}
	if *alloc > 0 {
		b := make([]byte, *alloc<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		runtime.KeepAlive(b)
	}
	if *ready != "" {
		if err := os.WriteFile(*ready, nil, 0o644); err != nil {
			fail("%v", err)
		}
	}
	for i, end := 0, time.Now().Add(*spam); time.Now().Before(end); i++ {
		fmt.Printf("line %08d %s\n", i, strings.Repeat("x", 40))
		if i%20 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(*sleep)
	os.Exit(*code)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "svc: "+format+"\n", args...)
	os.Exit(99)
}
