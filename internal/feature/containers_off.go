//go:build tend_omit_containers

package feature

const containers = false
