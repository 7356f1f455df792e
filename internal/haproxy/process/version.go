package process

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Version is an HAProxy binary's major and minor version, the unit its
// behaviour changes by (docs/architecture.md, "HAProxy versions").
type Version struct{ Major, Minor int }

// AtLeast reports whether v is major.minor or later.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// BinaryVersion runs `binary -v` and parses its first line,
// "HAProxy version 3.0.11-1+deb13u5 2026/11/18 - https://haproxy.org/".
func BinaryVersion(ctx context.Context, binary string) (Version, error) {
	if binary == "" {
		binary = "haproxy"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "-v").Output()
	if err != nil {
		return Version{}, fmt.Errorf("%s -v: %w", binary, err)
	}
	return ParseVersion(string(out))
}

// ParseVersion reads the version from `haproxy -v` or `-vv` output.
func ParseVersion(out string) (Version, error) {
	line, _, _ := strings.Cut(out, "\n")
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "HAProxy" || f[1] != "version" {
		return Version{}, fmt.Errorf("not an HAProxy version line: %q", line)
	}
	parts := strings.SplitN(f[2], ".", 3)
	if len(parts) < 2 {
		return Version{}, fmt.Errorf("no major.minor in %q", f[2])
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(leadingDigits(parts[1]))
	if err1 != nil || err2 != nil {
		return Version{}, fmt.Errorf("no major.minor in %q", f[2])
	}
	return Version{major, minor}, nil
}

// leadingDigits is s up to its first non-digit ("2" of "2-dev5").
func leadingDigits(s string) string {
	if i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		return s[:i]
	}
	return s
}
