// Package notify carries "the fleet changed, tick now" from CI to agents
// over MQTT 3.1.1: Publish sends one message (tend notify, after a merge)
// and a Subscriber keeps a subscription to the topic up, reconnecting with
// backoff, and hands every message to the agent's loop. In the flow of
// DESIGN.md it sits beside the source: it never says what changed, only
// when to fetch, and the payload is never trusted.
package notify
