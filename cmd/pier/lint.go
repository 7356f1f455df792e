package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"pier.dev/pier/internal/cluster"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/source/files"
	"pier.dev/pier/internal/translate"
)

// errUnsupported makes pier lint exit 1 once its report is printed.
var errUnsupported = errors.New("some annotations are unsupported or invalid")

// lintReport is what pier lint prints: per Ingress, how pier treats each
// of its pier.dev/ and nginx.ingress.kubernetes.io/ annotations.
type lintReport struct {
	Ingresses []lintIngress `json:"ingresses"`
	Summary   lintSummary   `json:"summary"`
}

type lintIngress struct {
	Namespace   string                       `json:"namespace"`
	Name        string                       `json:"name"`
	Annotations []translate.AnnotationReport `json:"annotations"`
}

type lintSummary struct {
	Ingresses               int `json:"ingresses"`
	Annotations             int `json:"annotations"`
	Supported               int `json:"supported"`
	SupportedWithDifference int `json:"supportedWithDifference"`
	Unsupported             int `json:"unsupported"`
}

func lintCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pier lint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var paths stringList
	fs.Var(&paths, "f", "manifest file or folder (repeatable)")
	output := fs.String("o", "text", "output format: text or json")
	kubeconfig := fs.String("kubeconfig", "", "read the Ingresses of a live cluster with this kubeconfig instead of files")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: pier lint (-f PATH... | --kubeconfig FILE) [-o json]\n\n"+
			"Reports, per Ingress, each pier.dev/ and nginx.ingress.kubernetes.io/ annotation as\n"+
			"supported, supported-with-difference or unsupported (docs/migration.md).\n"+
			"Exits 1 when anything is unsupported or invalid.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (len(paths) == 0) == (*kubeconfig == "") || (*output != "text" && *output != "json") {
		fs.Usage()
		return errUsage
	}
	var snap *source.Snapshot
	var problems []files.Problem
	var err error
	if *kubeconfig != "" {
		snap, err = clusterIngresses(ctx, *kubeconfig)
	} else {
		snap, problems, err = files.Load(paths)
	}
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintln(stderr, "pier lint:", p.String())
	}
	report := lint(snap)
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(report)
	} else {
		err = printLint(stdout, report)
	}
	if err != nil {
		return err
	}
	if report.Summary.Unsupported > 0 || len(problems) > 0 {
		return errUnsupported
	}
	return nil
}

// clusterIngresses lists every Ingress of the cluster kubeconfig names,
// sorted by namespace/name as files.Load sorts them.
func clusterIngresses(ctx context.Context, kubeconfig string) (*source.Snapshot, error) {
	cfg, err := cluster.RestConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	list, err := cs.NetworkingV1().Ingresses("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Ingresses: %w", err)
	}
	snap := &source.Snapshot{}
	for i := range list.Items {
		snap.Ingresses = append(snap.Ingresses, &list.Items[i])
	}
	sort.Slice(snap.Ingresses, func(i, j int) bool {
		a, b := snap.Ingresses[i], snap.Ingresses[j]
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Name < b.Name)
	})
	return snap, nil
}

// lint classifies the annotations of every Ingress of snap, in the
// snapshot's order (namespace/name).
func lint(snap *source.Snapshot) lintReport {
	r := lintReport{Ingresses: []lintIngress{}}
	for _, ing := range snap.Ingresses {
		li := lintIngress{Namespace: ing.Namespace, Name: ing.Name,
			Annotations: translate.ReportIngress(ing, translate.DefaultOptions())}
		if li.Annotations == nil {
			li.Annotations = []translate.AnnotationReport{}
		}
		for _, a := range li.Annotations {
			r.Summary.Annotations++
			switch a.Status {
			case translate.Supported:
				r.Summary.Supported++
			case translate.SupportedWithDifference:
				r.Summary.SupportedWithDifference++
			default:
				r.Summary.Unsupported++
			}
		}
		r.Ingresses = append(r.Ingresses, li)
	}
	r.Summary.Ingresses = len(r.Ingresses)
	return r
}

func printLint(w io.Writer, r lintReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, ing := range r.Ingresses {
		fmt.Fprintf(tw, "%s/%s\n", ing.Namespace, ing.Name)
		if len(ing.Annotations) == 0 {
			fmt.Fprintln(tw, "  (no pier.dev/ or ingress-nginx annotations)")
		}
		for _, a := range ing.Annotations {
			if a.Note == "" { // no padding left at the end of the line
				fmt.Fprintf(tw, "  %s\t%s\n", a.Key, a.Status)
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", a.Key, a.Status, a.Note)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := r.Summary
	_, err := fmt.Fprintf(w, "%d Ingresses, %d annotations: %d supported, %d supported with a difference, %d unsupported\n",
		s.Ingresses, s.Annotations, s.Supported, s.SupportedWithDifference, s.Unsupported)
	return err
}
