//go:build !tend_omit_containers

package main

// The container runtime (services with image:), which registers itself
// with package service; tend_omit_containers leaves it and the Docker
// Engine client out.
import _ "github.com/tend-dev/tend/applier/service/container"
