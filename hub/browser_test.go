package hub

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// browser starts a headless Chromium (Debian's chromium) for the test;
// without one it skips, unless CI is set (.ci/run installs it); with
// -short it skips.
func browser(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: a headless Chromium; make test runs it, -short skips it")
	}
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no chromium on PATH: apt-get install chromium")
		}
		t.Skip("no chromium on PATH: apt-get install chromium")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-gpu", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel3)
	// A dialog would mean a device's value ran as script.
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			t.Errorf("the page opened a dialog: %q", d.Message)
		}
	}))
	return ctx
}

// The fleet page in a real browser: the table lists the devices, the
// selector filter works, the release page draws its chart, and hostile
// names and labels are text.
func TestPageInBrowser(t *testing.T) {
	ctx := browser(t)
	h := newTestHub(t, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	srv, err := NewServer(h.store, Options{PublicRead: true, Now: h.clock.now})
	require.NoError(t, err)
	public := httptest.NewServer(srv)
	t.Cleanup(public.Close)

	for name, site := range map[string]string{"cam-1": "lyon", "cam-2": "lyon", "cam-3": "oslo"} {
		s := h.doc(name, rev1, "")
		s.Labels = map[string]string{"site": site}
		h.report(h.token(name), s)
	}
	h.clock.add(time.Minute)
	h.report(h.token("cam-1"), h.doc("cam-1", rev1, ""))
	hostile := h.doc(`<script>alert(1)</script>`, rev1, "")
	hostile.Labels = map[string]string{"site": `"><img src=x onerror=alert(2)>`}
	_, err = h.store.Ingest(context.Background(), &hostile, h.clock.now())
	require.NoError(t, err)

	eval := func(expr string, v any) {
		t.Helper()
		switch v := v.(type) {
		case *int:
			n, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr))
			require.NoError(t, err, expr)
			*v = n
		case *[]string:
			l, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](expr))
			require.NoError(t, err, expr)
			*v = l
		}
	}
	screenshot := func(name string) {
		t.Helper()
		if dir := os.Getenv("TEND_SCREENSHOTS"); dir != "" {
			shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), shot, 0o644))
		}
	}
	var rows, scripts, imgs int
	var names []string
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(public.URL+"/"), chromedp.WaitVisible("#devices")))
	eval(`document.querySelectorAll('#devices tbody tr').length`, &rows)
	eval(`Array.from(document.querySelectorAll('#devices tbody tr td:first-child')).map(td => td.textContent)`, &names)
	eval(`document.querySelectorAll('script').length`, &scripts)
	eval(`document.querySelectorAll('img').length`, &imgs)
	screenshot("fleet.png")
	assert.Equal(t, 4, rows)
	assert.Equal(t, []string{`<script>alert(1)</script>`, "cam-1", "cam-2", "cam-3"}, names, "the hostile name is text")
	assert.Zero(t, scripts, "no script element")
	assert.Zero(t, imgs, "no img element from a label")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetValue(`input[name="selector"]`, "site=oslo"),
		chromedp.Submit(`input[name="selector"]`),
	))
	// The poll starts before the form's navigation ends, which may
	// destroy its JavaScript context: poll again until the new page answers.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](`location.search.includes('selector') && document.querySelectorAll('#devices tbody tr').length === 1`))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err)
	eval(`Array.from(document.querySelectorAll('#devices tbody tr td:first-child')).map(td => td.textContent)`, &names)
	assert.Equal(t, []string{"cam-3"}, names)

	var lines int
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(public.URL+"/releases/"+rev1), chromedp.WaitVisible("#convergence")))
	eval(`document.querySelectorAll('#convergence polyline').length`, &lines)
	screenshot("release.png")
	assert.GreaterOrEqual(t, lines, 1)
}
