package nativedriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"pier.dev/pier/internal/fsutil"
	"pier.dev/pier/internal/model"
)

// uuidPattern is what a load balancer UUID looks like; only such a name
// becomes a file name, so a record from a shared store cannot
// name a path outside the state folder.
var uuidPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

func validUUID(s string) bool { return uuidPattern.MatchString(s) }

// state is the driver's folder: one JSON spec per load balancer served.
type state struct{ dir string }

func newState(stateDir string) (*state, error) {
	if stateDir == "" {
		return nil, errors.New("native driver: no state folder")
	}
	dir := filepath.Join(stateDir, "native")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("native driver: %w", err)
	}
	return &state{dir: dir}, nil
}

func (s *state) path(uuid string) string { return filepath.Join(s.dir, uuid+".json") }

// save writes lb's spec atomically (fsutil.WriteAtomic).
func (s *state) save(lb *model.LoadBalancer) error {
	spec := lb.Clone()
	spec.Status = model.Status{}
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return fsutil.WriteAtomic(s.path(lb.UUID), data, 0o600)
}

func (s *state) remove(uuid string) {
	if validUUID(uuid) {
		_ = os.Remove(s.path(uuid))
	}
}

// load returns the saved specs, sorted by UUID. An unreadable file is
// skipped: its load balancer is applied again by the agent if placed.
func (s *state) load() ([]*model.LoadBalancer, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("native driver: %w", err)
	}
	var out []*model.LoadBalancer
	for _, e := range entries {
		uuid, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !validUUID(uuid) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
		if err != nil {
			continue
		}
		var lb model.LoadBalancer
		if json.Unmarshal(data, &lb) != nil || lb.UUID != uuid {
			_ = os.Remove(filepath.Join(s.dir, e.Name()))
			continue
		}
		out = append(out, &lb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UUID < out[j].UUID })
	return out, nil
}
