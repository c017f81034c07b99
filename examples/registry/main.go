// Command registry is the OCI registry `make demo` serves example models
// from: go-containerregistry's in-process registry on loopback, with every
// folder of examples/models pushed as an ORAS-style artifact (one layer per
// file, named by its title annotation) tagged v1. With -program and -image
// (`make demo-containers`) it also builds that Go main package statically
// and pushes it FROM scratch as an image, the program its entrypoint. It
// writes host:port to the file -ready names once everything is pushed, and
// serves until it is stopped.
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
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/tend-dev/tend/internal/testkit/testdocker"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	models := flag.String("models", "examples/models", "folder of model folders to push")
	ready := flag.String("ready", "", "file to write host:port to once the models (and the image) are pushed")
	program := flag.String("program", "", "folder of a Go main package to build statically and push as -image")
	image := flag.String("image", "", "REPO:TAG the -program image is pushed as (e.g. apps/hello:v1)")
	flag.Parse()
	if (*program == "") != (*image == "") {
		fmt.Fprintln(os.Stderr, "registry: -program and -image go together: -program examples/hello-container -image apps/hello:v1")
		os.Exit(2)
	}
	if err := run(*addr, *models, *ready, *program, *image); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func run(addr, models, ready, program, image string) error {
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
	if program != "" {
		if err := pushProgram(host, program, image); err != nil {
			return err
		}
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

// pushProgram builds the Go main package in dir statically and pushes it
// FROM scratch to the registry at host as image (REPO:TAG).
func pushProgram(host, dir, image string) error {
	repo, tag, ok := strings.Cut(image, ":")
	if !ok || repo == "" || tag == "" {
		return fmt.Errorf("-image %q: use REPO:TAG, e.g. apps/hello:v1", image)
	}
	tmp, err := os.MkdirTemp("", "registry-program-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "prog")
	if err := testdocker.BuildProgram(dir, bin); err != nil {
		return err
	}
	img, err := testdocker.PushImage(host, repo, tag, bin)
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s → %s (%s, FROM scratch)\n", img.Tag, img.Digest, dir)
	return nil
}
