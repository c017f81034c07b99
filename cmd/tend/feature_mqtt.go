//go:build !tend_omit_mqtt

package main

// MQTT notify (notify.mqtt of the agent, tend notify), which registers
// itself with package notify; tend_omit_mqtt leaves it and paho out.
import _ "github.com/tend-dev/tend/notify/mqtt"
