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

func newNotifyCommand(g *globals) *cobra.Command {
	var cfg manifest.MQTTNotify
	var revision string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "notify --mqtt URL --topic TOPIC [--revision REV]",
		Short: "CI: tell the agents subscribed to an MQTT topic to tick now",
		Long: "notify publishes {\"revision\": REV} to TOPIC on the MQTT broker (QoS 1) and waits for the broker's\n" +
			"acknowledgement. Agents whose notify.mqtt names the topic tick at once (at most once per 5 s),\n" +
			"unless REV is the revision they applied; agents that miss it poll on their schedule anyway.\n" +
			"Run it in CI after a merge to the fleet repo (REV: the merged commit, or REF@sha1:COMMIT).\n" +
			"Exit codes: 0 published, 1 error (the broker unreachable or refusing the credentials).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, p := range []*string{&cfg.UsernameFile, &cfg.PasswordFile, &cfg.CAFile} {
				if *p != "" && !filepath.IsAbs(*p) {
					abs, err := filepath.Abs(*p)
					if err != nil {
						return err
					}
					*p = abs
				}
			}
			if errs := cfg.Check(""); len(errs) > 0 {
				for _, e := range errs {
					e.Field = notifyFlags[e.Field]
				}
				return errs
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := notify.Publish(ctx, cfg, notify.Payload{Revision: revision}); err != nil {
				return err
			}
			what := ""
			if revision != "" {
				what = " (revision " + revision + ")"
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "Notified %s on %s%s.\n", cfg.Topic, cfg.URL, what)
			return err
		},
	}
	g.addFlags(cmd) // reads no config: every config flag is accepted and ignored
	f := cmd.Flags()
	f.StringVar(&cfg.URL, "mqtt", "", "the broker: tcp://HOST:1883, ssl://HOST:8883 (or mqtts://), ws(s)://HOST/PATH")
	f.StringVar(&cfg.Topic, "topic", "", "the topic the agents subscribe to (their notify.mqtt.topic)")
	f.StringVar(&revision, "revision", "", "the revision merged: a commit, or REF@sha1:COMMIT (agents that applied it skip the tick)")
	f.StringVar(&cfg.UsernameFile, "username-file", "", "file holding the user name to connect with")
	f.StringVar(&cfg.PasswordFile, "password-file", "", "file holding the password to connect with")
	f.StringVar(&cfg.CAFile, "ca-file", "", "PEM bundle of the CA of the broker's certificate, for ssl:// (default: the system's)")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "how long to try to connect and have the message acknowledged")
	return cmd
}
