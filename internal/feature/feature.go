package feature

import (
	"errors"
	"fmt"
)

// A Feature is a part of tend that the build tag Tag leaves out.
type Feature struct {
	Name string // as the error says it: "cosign"
	Tag  string // the build tag that omits it: "tend_omit_cosign"
	// Linked is false in a binary built with Tag.
	Linked bool
	// Package is the import path of the implementation, which registers
	// itself when imported.
	Package string
}

// The optional features. Each Linked is a constant of this build (see the
// *_on.go and *_off.go files).
var (
	Containers = Feature{"containers", "tend_omit_containers", containers, "github.com/tend-dev/tend/applier/service/container"}
	Notation   = Feature{"notation", "tend_omit_notation", notation, "github.com/tend-dev/tend/oci/verify/notation"}
	Cosign     = Feature{"cosign", "tend_omit_cosign", cosign, "github.com/tend-dev/tend/oci/verify/cosign"}
	MQTT       = Feature{"mqtt", "tend_omit_mqtt", mqtt, "github.com/tend-dev/tend/notify/mqtt"}
)

// All lists the optional features, in the order DESIGN.md's "Build tags"
// lists their tags.
func All() []Feature { return []Feature{Containers, Notation, Cosign, MQTT} }

// ErrOmitted is the cause of every error asking for a feature this build
// left out: no retry or setting helps, only another build of tend (or a
// config that does not ask for it).
var ErrOmitted = errors.New("feature omitted from this build")

// OmittedError is asking for a feature this build left out.
type OmittedError struct{ Feature Feature }

func (e *OmittedError) Error() string {
	return fmt.Sprintf("this tend was built without %s (tag %s)", e.Feature.Name, e.Feature.Tag)
}

func (e *OmittedError) Unwrap() error { return ErrOmitted }

// Omitted is the error of asking for f in a build without it:
// "this tend was built without cosign (tag tend_omit_cosign)".
func (f Feature) Omitted() error { return &OmittedError{Feature: f} }

// Check is nil when this build has f, else f.Omitted().
func (f Feature) Check() error {
	if f.Linked {
		return nil
	}
	return f.Omitted()
}

// Unregistered is the error of a hook of f found unset: f.Omitted() in a
// build without f; in one with it, a program (a test) that did not import
// f's package, which registers it.
func (f Feature) Unregistered() error {
	if !f.Linked {
		return f.Omitted()
	}
	return fmt.Errorf("%s is not registered: import %q (cmd/tend does, in feature_%s.go)", f.Name, f.Package, f.Name)
}
