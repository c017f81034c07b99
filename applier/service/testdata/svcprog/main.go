// Command svcprog is a service for the service driver's tests (and tend's
// end-to-end tests): it prints its arguments and environment, serves
// /healthz when asked, exits when told to, and dies at its first start
// when told to. A test that must not race
// the clock tells it through a file: -exit-when and -unhealthy-when act
// once the file exists, not after a delay.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "", "serve /healthz on this address")
	exit := flag.Int("exit", -1, "exit with this code after -after")
	after := flag.Duration("after", 0, "when to exit")
	alloc := flag.Int("alloc", 0, "allocate and touch this many MiB, then wait")
	sick := flag.Duration("unhealthy-after", 0, "answer /healthz with 503 after this long")
	exitWhen := flag.String("exit-when", "", "with -exit: exit once this file exists (instead of after -after)")
	sickWhen := flag.String("unhealthy-when", "", "answer /healthz with 503 once this file exists")
	crashFirst := flag.String("crash-first", "", "if this file does not exist: create it and die of SIGKILL at once (a start killed in its first moments)")
	flag.Parse()
	if *crashFirst != "" && !exists(*crashFirst) {
		if err := os.WriteFile(*crashFirst, nil, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	env := os.Environ()
	sort.Strings(env)
	fmt.Printf("args %q\nenv %q\n", os.Args[1:], env)
	if *alloc > 0 {
		time.Sleep(200 * time.Millisecond) // let tend move it into its cgroup
		var keep [][]byte
		for range *alloc {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep), "MiB")
	}
	if *exit >= 0 {
		if *exitWhen != "" {
			for !exists(*exitWhen) {
				time.Sleep(10 * time.Millisecond)
			}
		} else {
			time.Sleep(*after)
		}
		os.Exit(*exit)
	}
	if *listen != "" {
		born := time.Now()
		http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
			if *sick > 0 && time.Since(born) > *sick || *sickWhen != "" && exists(*sickWhen) {
				http.Error(w, "sick", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
		if err := http.ListenAndServe(*listen, nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	select {}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
