// Command hello-container is the service `make demo-containers` runs as a
// container: a tiny HTTP server, built statically and pushed FROM scratch by
// examples/registry. GET /healthz answers ok (tend's health probe), and GET /
// answers with the content of the -greeting file and the files of the
// -model folder, both mounted into the container by tend. It logs a line at
// start and one per request, which `tend logs service/hello` shows.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8097", "address to serve on")
	greeting := flag.String("greeting", "/etc/hello/greeting", "file whose content GET / answers with")
	model := flag.String("model", "/models/detector", "folder whose files GET / lists")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.LUTC)

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		log.Printf("%s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		log.Printf("%s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)
		g, err := os.ReadFile(*greeting)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		files, err := os.ReadDir(*model)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "%s", g)
		fmt.Fprintf(w, "model %s:\n", *model)
		for _, f := range files {
			size := int64(0)
			if info, err := f.Info(); err == nil {
				size = info.Size()
			}
			fmt.Fprintf(w, "  %s (%d bytes)\n", f.Name(), size)
		}
	})

	srv := &http.Server{Addr: *listen, Handler: mux}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
		s := <-stop
		log.Printf("%s: stopping", s)
		_ = srv.Close()
	}()
	log.Printf("hello-container pid %d serving on %s (greeting %s, model %s)", os.Getpid(), *listen, *greeting, *model)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
