package service

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/statedir"
)

// instanceRecord is what is kept on disk about one running instance.
type instanceRecord struct {
	Instance  Instance  `json:"instance"`
	Proc      Proc      `json:"proc"`
	SpecHash  string    `json:"specHash"`
	Policy    string    `json:"restart"`
	StartedAt time.Time `json:"startedAt"`
	Restarts  int       `json:"restarts"`
	Crashes   int       `json:"crashes"` // quick exits in a row
	LastExit  string    `json:"lastExit,omitempty"`
	CleanExit bool      `json:"cleanExit,omitempty"` // the last exit was a clean exit 0
	// BootID is the kernel's boot id when the process started: after a
	// reboot, a pid and start time can match another process.
	BootID string `json:"bootID,omitempty"`
	// Probe, when the service has one, is checked every interval while
	// the agent watches: failureThreshold failures in a row restart it.
	Probe *Probe `json:"probe,omitempty"`
	// Inputs are what the resources the service depends on were declared
	// as when this instance started (see render.Service.Inputs); nil in a
	// record of an older tend.
	Inputs map[string]string `json:"inputs,omitempty"`
	// Starting, when set, says the instance was being started then and
	// its process is not known: tend died between the start and this
	// record. What it started is found and stopped (see sweep).
	Starting *time.Time `json:"starting,omitempty"`
}

func (s *Supervisor) recordPath(k instanceKey) string {
	return s.dir.Instance(k.service, k.replica)
}

func (s *Supervisor) readRecord(k instanceKey) (*instanceRecord, error) {
	var r instanceRecord
	found, err := atomicfile.ReadJSON(s.recordPath(k), &r)
	if errors.Is(err, atomicfile.ErrCorrupt) {
		return nil, fmt.Errorf("%w; stop the process by hand and remove the file", err)
	}
	if err != nil || !found {
		return nil, err
	}
	return &r, nil
}

func (s *Supervisor) writeRecord(r instanceRecord) error {
	// A record holds the service's environment, which may hold secrets:
	// readable by tend alone.
	file := s.recordPath(instanceKey{r.Instance.Service, r.Instance.Replica})
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Dir(file), filepath.Base(file), r, 0o600)
}

// serviceRecords reads the instance records of one service, by replica.
func (s *Supervisor) serviceRecords(name string) ([]instanceRecord, error) {
	entries, err := os.ReadDir(s.dir.Service(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []instanceRecord
	for _, e := range entries {
		replica, ok := statedir.InstanceReplica(e.Name())
		if !ok {
			continue
		}
		r, err := s.readRecord(instanceKey{name, replica})
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b instanceRecord) int { return a.Instance.Replica - b.Instance.Replica })
	return out, nil
}

// records reads every instance record.
func (s *Supervisor) records() ([]instanceRecord, error) {
	entries, err := os.ReadDir(string(s.dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []instanceRecord
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			recs, err := s.serviceRecords(e.Name())
			errs = append(errs, err)
			out = append(out, recs...)
		}
	}
	return out, errors.Join(errs...)
}

// Containers returns, by replica, the container id recorded for each
// instance of service name that runs as a container ("" for one not
// started yet); none for a process service. It reads records only.
func Containers(stateDir, name string) (map[int]string, error) {
	recs, err := (&Supervisor{dir: statedir.Dir(stateDir).Services()}).serviceRecords(name)
	if err != nil {
		return nil, err
	}
	var out map[int]string
	for _, r := range recs {
		if r.Instance.Image == "" {
			continue
		}
		if out == nil {
			out = map[int]string{}
		}
		out[r.Instance.Replica] = r.Proc.Container
	}
	return out, nil
}
