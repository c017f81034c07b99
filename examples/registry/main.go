// Command registry is the OCI registry `make demo` serves example models
// from: go-containerregistry's in-process registry on loopback, with every
// folder of examples/models pushed as an ORAS-style artifact (one layer per
// file, named by its title annotation) tagged v1. It writes host:port to
// the file -ready names once the models are pushed, and serves until it is
// stopped.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/tend-dev/tend/internal/testoci"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	models := flag.String("models", "examples/models", "folder of model folders to push")
	ready := flag.String("ready", "", "file to write host:port to once the models are pushed")
	flag.Parse()
	if err := run(*addr, *models, *ready); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func run(addr, models, ready string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	host := ln.Addr().String()
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go func() { _ = srv.Serve(ln) }()

	dirs, err := os.ReadDir(models)
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		files := map[string][]byte{}
		entries, err := os.ReadDir(filepath.Join(models, d.Name()))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Type().IsRegular() {
				if files[e.Name()], err = os.ReadFile(filepath.Join(models, d.Name(), e.Name())); err != nil {
					return err
				}
			}
		}
		digest, err := testoci.PushFiles(host, "models/"+d.Name()+":v1", files)
		if err != nil {
			return err
		}
		fmt.Printf("pushed %s/models/%s:v1 → %s (%d files)\n", host, d.Name(), digest, len(files))
	}
	if ready != "" {
		if err := os.WriteFile(ready, []byte(host), 0o644); err != nil {
			return err
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
	return srv.Close()
}
