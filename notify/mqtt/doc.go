// Package mqtt is notify's transport over MQTT 3.1.1 with
// github.com/eclipse/paho.mqtt.golang: TCP, TLS or WebSocket connections
// to the broker, credentials read from files, packets over MaxPacket
// refused by their header, and errors that say why a broker cannot be
// reached or refuses. It registers itself with package notify when
// imported; cmd/tend imports it from feature_mqtt.go, which the build tag
// tend_omit_mqtt leaves out. In the flow of DESIGN.md it sits beside the
// source, as notify does.
package mqtt
