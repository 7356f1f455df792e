package translate

import "pier.dev/pier/internal/annotation"

// applyPolicies applies the operator's --ignore-snippets and
// --ignore-protections to the issues annotation.Parse found in ann.
func applyPolicies(issues []annotation.Issue, ann map[string]string, opts Options) []annotation.Issue {
	return annotation.ApplyPolicies(issues, ann, annotation.Policy{
		IgnoreSnippets: opts.IgnoreSnippets, IgnoreProtections: opts.IgnoreProtections})
}
