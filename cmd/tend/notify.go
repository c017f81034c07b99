package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/notify"
)

// notifyFlags name tend notify's flags by the notify.mqtt field each sets,
// for errors.
var notifyFlags = map[string]string{
	"url": "--mqtt", "topic": "--topic", "usernameFile": "--username-file", "passwordFile": "--password-file", "caFile": "--ca-file",
}

const notifyLong = "notify publishes {\"revision\": REV} to TOPIC on the MQTT broker (QoS 1) and waits for the broker's\n" +
	"acknowledgement. Agents whose notify.mqtt names the topic tick at once (at most once per 5 s),\n" +
	"unless REV is the revision they applied; agents that miss it poll on their schedule anyway.\n" +
	"Run it in CI after a merge to the fleet repo (REV: the merged commit, or REF@sha1:COMMIT).\n" +
	"Exit codes: 0 published, 1 error (the broker unreachable or refusing the credentials)."

// notifyCmd is tend notify and its flags.
type notifyCmd struct {
	cfg      manifest.MQTTNotify
	revision string
	timeout  time.Duration
}

func newNotifyCommand(g *globals) *cobra.Command {
	n := &notifyCmd{}
	cmd := &cobra.Command{
		Use:   "notify --mqtt URL --topic TOPIC [--revision REV]",
		Short: "CI: tell the agents subscribed to an MQTT topic to tick now",
		Long:  notifyLong,
		Args:  cobra.NoArgs,
		RunE:  n.run,
	}
	g.addFlags(cmd) // reads no config: every config flag is accepted and ignored
	f := cmd.Flags()
	f.StringVar(&n.cfg.URL, "mqtt", "", "the broker: tcp://HOST:1883, ssl://HOST:8883 (or mqtts://), ws(s)://HOST/PATH")
	f.StringVar(&n.cfg.Topic, "topic", "", "the topic the agents subscribe to (their notify.mqtt.topic)")
	f.StringVar(&n.revision, "revision", "", "the revision merged: a commit, or REF@sha1:COMMIT (agents that applied it skip the tick)")
	f.StringVar(&n.cfg.UsernameFile, "username-file", "", "file holding the user name to connect with")
	f.StringVar(&n.cfg.PasswordFile, "password-file", "", "file holding the password to connect with")
	f.StringVar(&n.cfg.CAFile, "ca-file", "", "PEM bundle of the CA of the broker's certificate, for ssl:// (default: the system's)")
	f.DurationVar(&n.timeout, "timeout", 30*time.Second, "how long to try to connect and have the message acknowledged")
	return cmd
}

func (n *notifyCmd) run(cmd *cobra.Command, _ []string) error {
	if err := n.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), n.timeout)
	defer cancel()
	if err := notify.Publish(ctx, n.cfg, notify.Payload{Revision: n.revision}); err != nil {
		return err
	}
	what := ""
	if n.revision != "" {
		what = " (revision " + n.revision + ")"
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "Notified %s on %s%s.\n", n.cfg.Topic, n.cfg.URL, what)
	return err
}

// check makes the flags' files absolute and checks them as notify.mqtt
// is checked, naming the flags.
func (n *notifyCmd) check() error {
	for _, p := range []*string{&n.cfg.UsernameFile, &n.cfg.PasswordFile, &n.cfg.CAFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return err
			}
			*p = abs
		}
	}
	if errs := n.cfg.Check(""); len(errs) > 0 {
		for _, e := range errs {
			e.Field = notifyFlags[e.Field]
		}
		return errs
	}
	return nil
}
