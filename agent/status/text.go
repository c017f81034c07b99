package status

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// WriteText prints status s for people, as `tend status` does: the
// device and its last tick, every resource that is not ok, the recent
// drift, and a count of the rest. Now is the clock "how long ago" reads.
func WriteText(w io.Writer, s Status, now time.Time) error {
	var b strings.Builder
	line := func(label, value string) {
		value = strings.ReplaceAll(value, "\n", "\n"+strings.Repeat(" ", 18))
		fmt.Fprintf(&b, "%-18s%s\n", label+":", value)
	}
	line("Device", s.Device)
	line("Applied revision", orNone(s.AppliedRevision))
	if s.TargetRevision != "" && s.TargetRevision != s.AppliedRevision {
		line("Target revision", s.TargetRevision)
	}
	line("Last reconcile", ago(s.LastReconcile, now))
	if s.LastReconcile != "" {
		result := s.Result
		if s.Result == ResultSuspended {
			result += " (" + planner.Count(s.Pending, "change") + " pending, not applied)"
		}
		if s.ConsecutiveFailures > 1 {
			result += fmt.Sprintf(" (%d in a row)", s.ConsecutiveFailures)
		}
		line("Result", result)
		if s.LastSuccess != s.LastReconcile {
			line("Last success", ago(s.LastSuccess, now))
		}
	}
	if s.LastError != "" {
		line("Last error", s.LastError)
	}
	if s.Warning != "" {
		line("Warning", s.Warning)
	}
	if s.DiskFull != "" {
		line("Disk full", s.DiskFull)
	}
	if s.Held != "" {
		line("Release", s.Held+"; drift is still reverted")
	}
	if st := s.Staging; st != nil {
		line("Staging", stagingLine(*st))
	}
	suspended := "no"
	if s.Suspended {
		suspended = "yes: no applies, drift is still observed"
		if s.SuspendReason != "" {
			suspended = "yes (" + s.SuspendReason + "): no applies, drift is still observed"
		}
	}
	line("Suspended", suspended)
	if n := s.Notify; n != nil {
		if n.Connected {
			line("Notify", fmt.Sprintf("subscribed to %s on %s since %s", n.Topic, n.Broker, ago(n.Since, now)))
		} else {
			line("Notify", fmt.Sprintf("not connected to %s since %s: %s; polling on schedule continues", n.Broker, ago(n.Since, now), n.Error))
		}
	}
	writeServices(&b, s.Services)

	ok := 0
	var notOK, models []ResourceStatus
	for _, r := range s.Resources {
		if r.State == StateOK {
			ok++
			if strings.HasPrefix(r.ID, "model/") && r.Message != "" {
				models = append(models, r)
			}
		} else {
			notOK = append(notOK, r)
		}
	}
	if len(models) > 0 {
		b.WriteString("\nModels:\n")
		for _, r := range models {
			fmt.Fprintf(&b, "  %s: %s\n", strings.TrimPrefix(r.ID, "model/"), r.Message)
		}
	}
	if len(notOK) > 0 {
		b.WriteString("\nResources not ok:\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, r := range notOK {
			// A message of several lines (a joined error) stays on one.
			msg := strings.Join(strings.Fields(r.Message), " ")
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.State, r.ID, msg)
		}
		tw.Flush()
	}
	if len(s.Drift) > 0 {
		events := s.Drift
		fmt.Fprintf(&b, "\nRecent drift (%d):\n", len(events))
		if len(events) > maxDriftLines {
			fmt.Fprintf(&b, "  … %d earlier (--format json lists them)\n", len(events)-maxDriftLines)
			events = events[len(events)-maxDriftLines:]
		}
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, d := range events {
			reverted := "not reverted"
			if d.Reverted != "" {
				reverted = "reverted " + d.Reverted
				if t, err := time.Parse(time.RFC3339Nano, d.Reverted); err == nil {
					reverted = "reverted " + RFC3339(t)
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", RFC3339(d.Time), d.Resource, d.Reason, reverted)
		}
		tw.Flush()
	}
	noun := "resources"
	if ok == 1 {
		noun = "resource"
	}
	fmt.Fprintf(&b, "\n%d %s ok, %d not ok.\n", ok, noun, len(notOK))
	_, err := io.WriteString(w, b.String())
	return err
}

// writeServices prints a table of the services' replicas.
func writeServices(b *strings.Builder, services []ServiceStatus) {
	if len(services) == 0 {
		return
	}
	b.WriteString("\nServices:\n")
	// Health last: an unhealthy probe's message is long.
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	// Containers add a column, their id and image digest.
	containers := slices.ContainsFunc(services, func(s ServiceStatus) bool {
		return slices.ContainsFunc(s.Replicas, func(r ReplicaStatus) bool { return r.Image != "" })
	})
	if containers {
		fmt.Fprintln(tw, "  SERVICE\tREPLICA\tSTATE\tPID\tCONTAINER\tRESTARTS\tLAST EXIT\tHEALTH")
	} else {
		fmt.Fprintln(tw, "  SERVICE\tREPLICA\tSTATE\tPID\tRESTARTS\tLAST EXIT\tHEALTH")
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return strings.Join(strings.Fields(s), " ")
	}
	for _, svc := range services {
		for _, r := range svc.Replicas {
			pid, state := "-", r.State
			if r.PID != 0 {
				pid = fmt.Sprint(r.PID)
			}
			if r.CrashLoop {
				state += " (crash loop)"
			}
			if containers {
				fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", strings.TrimPrefix(svc.ID, "service/"), r.Replica, state, pid,
					containerColumn(r), r.Restarts, dash(r.LastExit), dash(r.Health))
				continue
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%d\t%s\t%s\n", strings.TrimPrefix(svc.ID, "service/"), r.Replica, state, pid, r.Restarts, dash(r.LastExit), dash(r.Health))
		}
	}
	tw.Flush()
}

// containerColumn is a container's short id and its image's short
// digest: "3f2a9c1b7d4e sha256:ab12cd34ef56"; "-" for a process.
func containerColumn(r ReplicaStatus) string {
	if r.Image == "" {
		return "-"
	}
	id := r.Container
	if len(id) > 12 {
		id = id[:12]
	}
	if id == "" {
		id = "-"
	}
	digest := r.Image
	if _, d, ok := strings.Cut(r.Image, "@"); ok {
		digest = planner.ShortDigest(d)
	}
	return id + " " + digest
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}

// ago prints an RFC 3339 time and how long before now it was.
func ago(ts string, now time.Time) string {
	if ts == "" {
		return "never"
	}
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return ts
	}
	return fmt.Sprintf("%s (%s ago)", ts, shortDuration(now.Sub(t)))
}

// shortDuration prints d to the second, shorter than Duration.String
// does: 42s, 4m42s, 1m, 3h5m, 2d4h.
func shortDuration(d time.Duration) string {
	d = max(d.Round(time.Second), 0)
	if d >= 48*time.Hour {
		return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	}
	if d >= time.Hour {
		d = d.Round(time.Minute)
	}
	return manifest.FormatDuration(d)
}

// stagingLine says how a staging goes in one line:
// "main@sha1:ab12… 412.0 MB / 1.9 GB (21%) 2.1 MB/s ETA 11m0s".
func stagingLine(st Staging) string {
	b := fmt.Sprintf("%s %s / %s", st.Revision, printable.HumanBytes(st.Bytes), printable.HumanBytes(st.TotalBytes))
	if st.TotalBytes > 0 {
		b += fmt.Sprintf(" (%d%%)", st.Bytes*100/st.TotalBytes)
	}
	switch {
	case st.Bytes >= st.TotalBytes:
		b += ", staged: activates when the release is taken"
	case st.BytesPerSecond > 0:
		b += fmt.Sprintf(" %s/s", printable.HumanBytes(st.BytesPerSecond))
		if st.ETA != "" {
			b += " ETA " + st.ETA
		}
	}
	if st.Error != "" {
		b += "; last attempt failed: " + st.Error
	}
	return b
}
