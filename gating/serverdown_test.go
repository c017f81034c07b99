package gating

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A server that did not answer is left alone by the next question and
// for the back-off, which doubles with each failure in a row; an answer,
// a clock set back or another URL end the rest.
func TestServerDownRests(t *testing.T) {
	const a, b = "https://a.example", "https://b.example"
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var d serverDown
	_, ok := d.rests(a, at)
	require.False(t, ok, "a server that never failed is asked")

	d.failed(a, "hub did not answer: "+a, at)
	why, ok := d.rests(a, at.Add(time.Hour))
	require.True(t, ok, "the next question is not asked, however late")
	require.Equal(t, "hub did not answer: "+a, why)
	_, ok = d.rests(a, at.Add(time.Minute-time.Nanosecond))
	require.True(t, ok)
	_, ok = d.rests(b, at)
	require.False(t, ok, "another URL is asked")
	_, ok = d.rests(a, at.Add(time.Minute))
	require.False(t, ok, "asked again once the back-off has passed")

	d.failed(a, "hub did not answer: "+a, at)
	_, ok = d.rests(a, at)
	require.True(t, ok)
	_, ok = d.rests(a, at.Add(time.Minute))
	require.True(t, ok, "the second failure in a row doubles the back-off")
	_, ok = d.rests(a, at.Add(-time.Second))
	require.False(t, ok, "a clock set back before the failure asks at once")

	d.answered(a)
	_, ok = d.rests(a, at)
	require.False(t, ok, "a server that answered is asked")
	d.failed(a, "hub did not answer: "+a, at)
	_, ok = d.rests(a, at)
	require.True(t, ok)
	_, ok = d.rests(a, at.Add(time.Minute))
	require.False(t, ok, "an answer starts the back-off over")
}
