// Command imagetool writes the container image of a tend release as an
// OCI image layout archive and prints its index digest (.ci/release runs
// it; see package release):
//
//	go run ./internal/release/imagetool -out dist/tend_0.1.0_image.tar \
//	  -version v0.1.0 -revision COMMIT -source https://github.com/tend-dev/tend \
//	  -created "$SOURCE_DATE_EPOCH" linux/amd64=build/amd64/tend linux/arm/v7=build/arm/tend
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/tend-dev/tend/internal/release"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "imagetool:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("imagetool", flag.ContinueOnError)
	out := fs.String("out", "", "the archive to write (an OCI image layout in a tar)")
	var im release.Image
	fs.StringVar(&im.Version, "version", "", "the release's version (annotation, and the layout's ref name)")
	fs.StringVar(&im.Revision, "revision", "", "the commit the binaries were built from")
	fs.StringVar(&im.Source, "source", "", "the repository's URL")
	fs.StringVar(&im.Program, "program", "tend", "the binary's name: it sits at "+release.BinDir+"PROGRAM, the entrypoint")
	created := fs.String("created", "", "the creation time, in seconds since 1970 (SOURCE_DATE_EPOCH)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: imagetool -out FILE -version V -revision COMMIT [-source URL] [-program tend-hub] -created EPOCH PLATFORM=BINARY...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("no -out: the archive to write, e.g. dist/tend_0.1.0_image.tar")
	}
	if *created != "" {
		sec, err := strconv.ParseInt(*created, 10, 64)
		if err != nil {
			return fmt.Errorf("-created %q: want seconds since 1970 (SOURCE_DATE_EPOCH, e.g. git log -1 --format=%%ct)", *created)
		}
		im.Created = time.Unix(sec, 0).UTC()
	}
	for _, a := range fs.Args() {
		b, err := release.ParseBinary(a)
		if err != nil {
			return err
		}
		im.Binaries = append(im.Binaries, b)
	}
	d, err := im.WriteArchive(*out)
	if err != nil {
		return err
	}
	fmt.Println(d)
	return nil
}
