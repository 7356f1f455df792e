package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"pier.dev/pier/internal/agent/haproxydriver"
	"pier.dev/pier/internal/lint"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/source/files"
	"pier.dev/pier/internal/translate"
)

// errUnsupported makes pier lint exit 1 once its report is printed.
var errUnsupported = errors.New("some Ingresses would be refused, or some documents cannot be read")

// lintOutput is what pier lint prints: the verdicts, and the documents
// that could not be read (an Ingress of an old API version among them).
type lintOutput struct {
	*lint.Report
	NotRead []string `json:"notRead"`
	// Unlisted names what could not be read from a live cluster.
	Unlisted []string `json:"unlisted,omitempty"`
}

func lintCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pier lint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		paths   stringList
		classes stringList
		tr      translateFlags
		pools   poolFlags
		details bool
	)
	fs.Var(&paths, "f", "manifest file or folder (repeatable), as pier run reads them")
	output := fs.String("o", "text", "output format: text or json")
	kubeconfig := fs.String("kubeconfig", "", "read the objects of a live cluster with this kubeconfig instead of files")
	haproxyBin := fs.String("haproxy", "haproxy", "HAProxy binary that checks each rendered configuration (haproxy -c), as the agent does; when it is not found the configurations are rendered but not checked, and the report says so")
	fs.BoolVar(&details, "v", false, "list every difference, problem and annotation of each Ingress under its line")
	fs.BoolVar(&details, "details", false, "same as -v")
	fs.Var(&classes, "ingress-class", "treat the IngressClass of this name as pier's (repeatable): the verdict once the class is moved over, e.g. --ingress-class nginx")
	allowLoopback := fs.Bool("allow-loopback-endpoints", true, "accept endpoints at loopback addresses as members, as pier run does (but for its API's address, 127.0.0.1:8082); =false gives the controller's default verdict")
	tr.register(fs)
	pools.register(fs, "127.10.0.0/16", "CIDR the internal VIPs are allocated from (pier run's default; pass the controller's to lint for it)", "127.20.0.0/16")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: pier lint (-f PATH... | --kubeconfig FILE) [-v] [-o json] [flags]\n\n"+
			"Gives, per Ingress, the verdict pier would: serves, serves with differences (from\n"+
			"ingress-nginx), refused (and why), or not pier's. It runs what pier run runs up to\n"+
			"HAProxy: translation, addresses and quotas, the agent's render and haproxy -c; pass\n"+
			"the flags pier run or the controller gets. Also reports hosts spread over several\n"+
			"load balancers (docs/migration.md). Exits 1 when an Ingress would be refused or a\n"+
			"document cannot be read.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (len(paths) == 0) == (*kubeconfig == "") || (*output != "text" && *output != "json") {
		fs.Usage()
		return errUsage
	}
	snap, problems, unlisted, err := lintInput(ctx, *kubeconfig, paths)
	if err != nil {
		return err
	}
	apiAddr := ""
	if *allowLoopback {
		apiAddr = "127.0.0.1:8082" // pier run's --api-addr default, reserved as there
	}
	if tr.opts.Members, err = translate.NewMemberPolicy(*allowLoopback, apiAddr, pools.internal, pools.public); err != nil {
		return err
	}
	cfg, err := lintConfig(tr, pools, *haproxyBin, classes)
	if err != nil {
		return err
	}
	report, err := lint.Run(ctx, snap, cfg)
	if err != nil {
		return err
	}
	out := lintOutput{Report: report, NotRead: []string{}, Unlisted: unlisted}
	for _, p := range problems {
		out.NotRead = append(out.NotRead, printable(p.String()))
	}
	if *output == "json" {
		var b []byte
		if b, err = json.MarshalIndent(out, "", "  "); err == nil {
			_, err = stdout.Write(append(jsonTerminalSafe(b), '\n'))
		}
	} else {
		err = printLint(stdout, out, details)
	}
	if err != nil {
		return err
	}
	if report.Summary.Refused > 0 || len(problems) > 0 {
		return errUnsupported
	}
	return nil
}

// lintInput reads the objects to lint: of a live cluster, or of files
// (with the documents that could not be read).
func lintInput(ctx context.Context, kubeconfig string, paths []string) (*source.Snapshot, []files.Problem, []string, error) {
	if kubeconfig != "" {
		snap, unlisted, err := clusterSnapshot(ctx, kubeconfig)
		return snap, nil, unlisted, err
	}
	snap, problems, err := files.Load(paths)
	return snap, problems, nil, err
}

// lintConfig is the lint configuration of the flags: translation and
// IPAM as given, the agent's render with pier run's defaults.
func lintConfig(tr translateFlags, pools poolFlags, binary string, classes []string) (lint.Config, error) {
	var h haproxyFlags
	h.register(flag.NewFlagSet("defaults", flag.ContinueOnError))
	h.user = "" // the check runs no worker: no user to switch to
	opts, err := h.render(slog.New(slog.DiscardHandler))
	if err != nil {
		return lint.Config{}, err
	}
	topts, err := tr.options()
	if err != nil {
		return lint.Config{}, err
	}
	quota, err := pools.quotaFor(pools.internal, pools.public)
	if err != nil {
		return lint.Config{}, err
	}
	return lint.Config{Translate: topts, InternalPool: pools.internal, PublicPool: pools.public, Quota: quota,
		HAProxy: binary, Render: opts, Processes: haproxydriver.DefaultProcesses, Classes: classes}, nil
}

func printLint(w io.Writer, out lintOutput, details bool) error {
	r := out.Report
	fmt.Fprintln(w, r.HAProxy)
	for _, u := range out.Unlisted {
		fmt.Fprintln(w, "not read from the cluster:", u)
	}
	if details {
		for _, ing := range r.Ingresses {
			fmt.Fprintln(w, verdictLine(ing, "  ", true))
			if err := printDetails(w, ing); err != nil {
				return err
			}
		}
		for _, d := range out.NotRead {
			fmt.Fprintf(w, "not read: %s\n", d)
		}
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, ing := range r.Ingresses {
			fmt.Fprintln(tw, verdictLine(ing, "\t", false))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, d := range out.NotRead {
			fmt.Fprintf(w, "not read: %s\n", d)
		}
	}
	for _, s := range r.HostSplits {
		fmt.Fprintf(w, "host %s is spread over %d load balancers (%s), each with its own address; with ingress-nginx one address answers for the class: %s\n",
			printable(s.Host), len(s.LoadBalancers), printable(strings.Join(s.Ingresses, ", ")), printable(s.Advice))
	}
	s := r.Summary
	line := fmt.Sprintf("%s: %d serve, %d serve with differences, %d refused, %d not pier's",
		plural(s.Ingresses, "Ingress"), s.Serves, s.ServesWithDifferences, s.Refused, s.NotOurs)
	if len(out.NotRead) > 0 {
		line += "; " + plural(len(out.NotRead), "document") + " not read"
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// verdictLine is an Ingress's line: its name, its verdict and why (or
// how many differences -v lists), separated by sep.
func verdictLine(ing lint.Ingress, sep string, details bool) string {
	line := printable(ing.Namespace+"/"+ing.Name) + sep + string(ing.Verdict)
	switch {
	case ing.Reason != "" && details:
		line += sep + printable(ing.Reason)
	case ing.Reason != "":
		line += sep + firstLine(printable(ing.Reason))
	case len(ing.Differences) > 0 && !details:
		line += sep + plural(len(ing.Differences), "difference") + " (-v lists them)"
	}
	return line
}

// printDetails lists what -v shows under an Ingress's line.
func printDetails(w io.Writer, ing lint.Ingress) error {
	if ing.LoadBalancer != "" {
		fmt.Fprintf(w, "    load balancer %s\n", printable(ing.LoadBalancer))
	}
	for _, d := range ing.Differences {
		fmt.Fprintf(w, "    - %s\n", printable(d))
	}
	if ing.Verdict == lint.Refused {
		for _, p := range ing.Problems {
			fmt.Fprintf(w, "    - %s %s: %s\n", p.Severity, printable(p.Reason), printable(p.Message))
		}
	}
	// The notes are in the lines above: the table says only how each
	// annotation is read.
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, a := range ing.Annotations {
		fmt.Fprintf(tw, "    %s\t%s\n", printable(a.Key), a.Status)
	}
	return tw.Flush()
}

// maxReason bounds the reason on an Ingress's line without -v: HAProxy's
// refusal is kilobytes over many lines, and -v prints it whole.
const maxReason = 400

// firstLine is the first line of a printable reason (its newlines are
// escaped as \n), cut to maxReason runes.
func firstLine(s string) string {
	line, _, more := strings.Cut(s, `\n`)
	if r := []rune(line); len(r) > maxReason {
		line, more = string(r[:maxReason]), true
	}
	if more {
		line += " … (-v shows all)"
	}
	return line
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, "ss") {
		return strconv.Itoa(n) + " " + word + "es"
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// printable escapes what a terminal would act on in a user string that
// reaches pier lint's output (names from manifest files are checked by
// no API server): control, format and bidi characters, and invalid
// UTF-8, as \u escapes.
func printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == unicode.ReplacementChar || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) ||
			(r > unicode.MaxASCII && !unicode.IsPrint(r) && r != ' ') {
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// jsonTerminalSafe writes, in encoded JSON, every character that does not
// print as itself as a \u escape. encoding/json escapes the C0 controls
// already, but not DEL, the C1 controls (U+009B is a CSI to some
// terminals) nor the bidi and zero-width ones. Outside strings JSON holds
// only printable characters and the indentation's newlines, so the
// escapes land inside strings, where they mean the same text.
func jsonTerminalSafe(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for _, r := range string(b) {
		if r == '\n' || strconv.IsPrint(r) {
			out = utf8.AppendRune(out, r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			out = fmt.Appendf(out, `\u%04x`, u)
		}
	}
	return out
}
