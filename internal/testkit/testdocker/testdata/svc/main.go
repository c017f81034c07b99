// Command svc is the program of testdocker's test image: it prints a line
// naming itself (and -say's text) on stdout and one on stderr, then runs
// until SIGTERM (exit 0) or, with -exit N, exits at once with code N.
// With -alloc N it first allocates and touches N MiB (to meet a memory
// limit). With -id it also prints "svc run ID", ID random to each run
// (every run of a container prints the same pid, 1). With -listen ADDR it
// serves HTTP on ADDR.
package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	say := flag.String("say", "", "a line to print after the first")
	exit := flag.Int("exit", -1, "exit at once with this code")
	alloc := flag.Int("alloc", 0, "MiB to allocate and touch first")
	id := flag.Bool("id", false, "print an id random to this run")
	listen := flag.String("listen", "", "serve HTTP on this address")
	flag.Parse()
	var mem [][]byte
	for range *alloc {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = 1
		}
		mem = append(mem, b)
	}
	fmt.Printf("svc up pid %d\n", os.Getpid())
	if *id {
		fmt.Println("svc run " + rand.Text())
	}
	if *listen != "" {
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		go func() { _ = http.Serve(ln, http.NotFoundHandler()) }()
	}
	if *say != "" {
		fmt.Println(*say)
	}
	fmt.Fprintln(os.Stderr, "svc stderr")
	if *exit >= 0 {
		os.Exit(*exit)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	fmt.Println("svc stopping", len(mem))
}
