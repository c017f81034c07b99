// Package testmqtt runs Debian's mosquitto broker for tests: on a free
// loopback port, anonymous or with users, over TCP or TLS, and lets a test
// kill and restart it on the same port.
package testmqtt
