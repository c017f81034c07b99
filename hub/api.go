package hub

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
)

// recentEvents is how many events a device's JSON and page show.
const recentEvents = 50

// releasesListed is how many releases GET /v1/releases lists, newest.
const releasesListed = 50

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) //nolint:errcheck // the client went away
}

// fail answers err: 404 for what the hub never heard of, 409 for a name
// of several releases, 400 for a bad query (bad), 503 for the database.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error, bad bool) {
	code := http.StatusServiceUnavailable
	switch {
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrAmbiguous):
		code = http.StatusConflict
	case bad, errors.Is(err, errBadName):
		code = http.StatusBadRequest
	default:
		// A database down answers every request so: logged once a path
		// a minute (see logLimit), counted.
		s.failLog.Log(r.Context(), slog.LevelError, r.URL.Path, "path", r.URL.Path, keyError, err.Error())
	}
	http.Error(w, err.Error(), code)
}

func (s *Server) deviceList(r *http.Request) (DeviceList, bool, error) {
	q, err := parseQuery(r.URL.Query())
	if err != nil {
		return DeviceList{}, true, err
	}
	all, err := s.store.Devices(r.Context())
	if err != nil {
		return DeviceList{}, false, err
	}
	l, err := list(all, q)
	return l, true, err
}

func (s *Server) apiDevices(w http.ResponseWriter, r *http.Request) {
	l, bad, err := s.deviceList(r)
	if err != nil {
		s.fail(w, r, err, bad)
		return
	}
	writeJSON(w, l)
}

func (s *Server) apiDevice(w http.ResponseWriter, r *http.Request) {
	d, err := s.store.Device(r.Context(), r.PathValue("name"), recentEvents)
	if err != nil {
		s.fail(w, r, err, false)
		return
	}
	writeJSON(w, d)
}

func (s *Server) apiReleases(w http.ResponseWriter, r *http.Request) {
	rels, err := s.store.Releases(r.Context(), releasesListed)
	if err != nil {
		s.fail(w, r, err, false)
		return
	}
	writeJSON(w, ReleaseList{FormatVersion: "1", Releases: rels})
}

// release reads the release {release} names (see Store.FindRelease).
func (s *Server) release(r *http.Request) (ReleaseDetail, error) {
	key, err := s.store.FindRelease(r.Context(), r.PathValue("release"))
	if err != nil {
		return ReleaseDetail{}, err
	}
	return s.store.ReleaseDetail(r.Context(), key)
}

func (s *Server) apiRelease(w http.ResponseWriter, r *http.Request) {
	rd, err := s.release(r)
	if err != nil {
		s.fail(w, r, err, false)
		return
	}
	writeJSON(w, rd)
}
