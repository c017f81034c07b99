//go:build !tend_omit_mqtt

package feature

const mqtt = true
