// Package promtext reads a Prometheus handler's text exposition for
// tests: every sample by its name and labels. It is test support, not
// part of tend's flow.
package promtext
