package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"pier.dev/pier/internal/fsutil"
)

// maxOutput caps HAProxy output carried in errors; the first lines hold the
// cause, the rest is usually a cascade.
const maxOutput = 4096

// CheckTimeout bounds a `haproxy -c`. HAProxy does work while it checks
// that a configuration can ask for (it hashes every password of a
// userlist, compiles every regular expression), and the checks of a
// process run one at a time, in the lane of every change of every load
// balancer there: one that runs on must not hold them. A shard's check
// of 750 load balancers takes 0.7 s; 30 s is far from a legitimate one.
const CheckTimeout = 30 * time.Second

// ErrCheckTimeout wraps the error of a check that ran past its deadline
// and was killed.
var ErrCheckTimeout = errors.New("check deadline exceeded")

// Check runs `haproxy -c` on files (a directory loads its *.cfg files in
// lexical order), killed after CheckTimeout. A configuration HAProxy
// refuses yields an error wrapping ErrCheckFailed that carries HAProxy's
// output; one it checks for too long, ErrCheckTimeout (and
// ErrCheckFailed: the configuration is not to be loaded).
func Check(ctx context.Context, binary string, files []string) error {
	return check(ctx, binary, files, CheckTimeout)
}

func check(ctx context.Context, binary string, files []string, timeout time.Duration) error {
	if len(files) == 0 {
		return errors.New("haproxy check: no configuration file")
	}
	if binary == "" {
		binary = "haproxy"
	}
	args := []string{"-c"}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	deadline, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(deadline, binary, args...) // killed at the deadline
	cmd.Env = minimalEnv()
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("haproxy check: %w", ctx.Err())
	}
	if deadline.Err() != nil {
		err := fmt.Errorf("haproxy -c took longer than %s, killed: %w (%w)", timeout, ErrCheckTimeout, ErrCheckFailed)
		if s := trimOutput(out); s != "" {
			err = fmt.Errorf("%w: %s", err, s)
		}
		return err
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return fmt.Errorf("haproxy check: %w", err)
	}
	return fmt.Errorf("%w (%s): %s", ErrCheckFailed, exit.ProcessState, trimOutput(out))
}

// trimOutput trims HAProxy output and caps its size.
func trimOutput(out []byte) string {
	s := strings.TrimSpace(string(out))
	if len(s) > maxOutput {
		s = s[:maxOutput] + " …(truncated)"
	}
	return s
}

// stageAndCheck copies the configured files into a new folder in Dir and
// checks the copy, so what passed the check is byte for byte what loads.
func (i *Instance) stageAndCheck(ctx context.Context) (string, error) {
	staged, err := i.stage()
	if err != nil {
		return "", err
	}
	if err := Check(ctx, i.cfg.Binary, []string{staged}); err != nil {
		_ = os.RemoveAll(staged)
		if ctx.Err() != nil && !errors.Is(err, ErrCheckFailed) {
			i.log.Info("haproxy -c cancelled: the configuration is no longer wanted")
			return "", err
		}
		i.checksFailed.Add(1)
		i.log.Warn("configuration refused by haproxy -c", "err", err)
		return "", err
	}
	return staged, nil
}

func (i *Instance) stage() (string, error) {
	files := i.configFiles()
	if len(files) == 0 {
		return "", errors.New("no configuration file")
	}
	dir, err := os.MkdirTemp(i.cfg.Dir, "conf-")
	if err != nil {
		return "", err
	}
	for n, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, stagedName(n, f)), b, 0o600)
		}
		if err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("stage configuration: %w", err)
		}
	}
	return dir, nil
}

// stagedName keeps the order (HAProxy sorts a folder's files) and enough of
// the original path that HAProxy's messages still say which file is wrong.
func stagedName(n int, path string) string {
	name := filepath.Base(filepath.Dir(path)) + "_" + filepath.Base(path)
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, name)
	if len(name) > 100 {
		name = name[len(name)-100:]
	}
	return fmt.Sprintf("%04d-%s.cfg", n, name)
}

// activate points the conf link at staged with an atomic rename and returns
// the previous target ("" if none), so a failed load can be undone.
func (i *Instance) activate(staged string) (string, error) {
	link := i.confLink()
	prev, _ := os.Readlink(link)
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(staged), tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return prev, nil
}

// rollback makes prev active again and drops the staged set that failed to
// load: a restart must never pick up a configuration that did not load.
func (i *Instance) rollback(prev, staged string) {
	var err error
	if prev == "" {
		err = os.Remove(i.confLink())
	} else {
		_, err = i.activate(filepath.Join(i.cfg.Dir, prev))
	}
	if err != nil {
		i.log.Error("restore last-good configuration", "err", err)
	}
	_ = os.RemoveAll(staged)
}

// prune removes every staged set but the active one.
func (i *Instance) prune() {
	active, _ := os.Readlink(i.confLink())
	entries, _ := os.ReadDir(i.cfg.Dir)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "conf-") && e.Name() != active {
			_ = os.RemoveAll(filepath.Join(i.cfg.Dir, e.Name()))
		}
	}
}

// ConfigChanged reports whether the configured files differ from the set
// HAProxy last loaded. After adopting a master, a caller reloads only when
// this is true, so a pier restart alone causes no reload.
func (i *Instance) ConfigChanged() (bool, error) {
	files := i.configFiles()
	active, err := filepath.Glob(filepath.Join(i.confLink(), "*.cfg"))
	if err != nil {
		return true, err
	}
	sort.Strings(active)
	if len(active) != len(files) {
		return true, nil
	}
	for n := range files {
		want, err := os.ReadFile(files[n])
		if err != nil {
			return true, err
		}
		got, err := os.ReadFile(active[n])
		if err != nil || !bytes.Equal(want, got) {
			return true, nil
		}
	}
	return false, nil
}

// Restage checks the configured files and makes them the set that a
// restart or adoption compares and loads, without a reload. It is for a
// caller that has already brought the running HAProxy to what the files
// describe through the runtime API: otherwise a supervisor restart would
// load the older set, and a new pier adopting the master would see a
// change and reload for nothing. A set that fails the check is not
// activated; the running HAProxy is untouched either way.
func (i *Instance) Restage(ctx context.Context) error {
	return i.restage(ctx, true)
}

// RestageFile is Restage without haproxy -c of the whole set, for a
// caller that changed one file of the set, path, and checked it (a
// shard's fragment, checked alone with the process files after a runtime
// update, or differing from such a fragment only in member values): a
// check of the whole set parses every load balancer of the shard (0.7 s
// at 750), in the lane of the next change. path's content replaces its
// copy in the active set in place, with a rename, instead of the whole
// set being copied into a new one.
// Copying is a file created per load balancer of the shard: 80–90 ms of
// a CPU per endpoint change at 250 load balancers a shard (measured).
// A reader of the set (a supervisor restart, an adoption) sees the old
// or the new copy of path, both of a set that runs. When the list of
// files is not the active set's (a load balancer joined or left since),
// the whole set is staged again, unchecked.
func (i *Instance) RestageFile(ctx context.Context, path string) error {
	replaced, err := i.replaceInActive(path)
	if err != nil {
		return fmt.Errorf("restage %s: %w", path, err)
	}
	if replaced {
		return nil
	}
	return i.restage(ctx, false)
}

// replaceInActive replaces path's copy in the active set, and says
// whether it could: the active set must hold exactly the configured
// files, path among them.
func (i *Instance) replaceInActive(path string) (bool, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	active, err := os.Readlink(i.confLink())
	if err != nil {
		return false, nil
	}
	dir := filepath.Join(i.cfg.Dir, active)
	files := i.configFiles()
	if i.listed.dir != dir || !slices.Equal(i.listed.files, files) {
		// Read the set once per set and list of files: a shard's set
		// holds hundreds of files, and an endpoint change replaces one.
		// Only activate makes another set, and replaceFile keeps names.
		names, ok := stagedNamesIn(dir, files)
		if !ok {
			return false, nil
		}
		i.listed = activeListing{dir: dir, files: files, names: names}
	}
	name, ok := i.listed.names[path]
	if !ok {
		return false, nil
	}
	return true, replaceFile(filepath.Join(dir, name), path)
}

// activeListing is what replaceInActive found in the active set: dir
// held exactly the staged names of files, names maps each file to its.
type activeListing struct {
	dir   string
	files []string
	names map[string]string
}

// stagedNamesIn returns the name each of files has in the staged set
// dir, if dir holds exactly their staged names.
func stagedNamesIn(dir string, files []string) (map[string]string, bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, false
	}
	var have []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".cfg") {
			have = append(have, e.Name())
		}
	}
	if len(have) != len(files) {
		return nil, false
	}
	names := make(map[string]string, len(files))
	for n, f := range files {
		name := stagedName(n, f)
		if have[n] != name { // ReadDir sorts by name, as stagedName's numbers do
			return nil, false
		}
		names[f] = name
	}
	return names, true
}

// replaceFile puts src's content at dst (fsutil.WriteAtomic): a reader
// sees the old file or the new one, never a part, and HAProxy never
// loads the temporary one.
func replaceFile(dst, src string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return fsutil.WriteAtomic(dst, b, 0o600)
}

func (i *Instance) restage(ctx context.Context, check bool) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	var staged string
	var err error
	if check {
		staged, err = i.stageAndCheck(ctx)
	} else {
		staged, err = i.stage()
	}
	if err != nil {
		return err
	}
	if _, err := i.activate(staged); err != nil {
		_ = os.RemoveAll(staged)
		return err
	}
	i.prune()
	return nil
}
