package model

import (
	"reflect"
	"sort"
	"time"
)

// State summarises what agents report for a LoadBalancer.
type State string

const (
	StatePending State = "PENDING" // not yet applied by any agent
	StateActive  State = "ACTIVE"  // the active node serves the current spec
	StateError   State = "ERROR"   // the last apply failed; the previous config keeps serving
)

// Status is written by agents. Every node a LoadBalancer is placed on
// reports its own NodeStatus; the other fields summarise the report of the
// active node (the one that holds the addresses), so that `kubectl get`
// columns and the status writer read one place. Stores keep the summary in
// step with the reports and the placement (Summarize), so readers never
// compute it.
type Status struct {
	State State `json:"state"`
	// SpecHash is the SpecHash of the spec last applied successfully.
	SpecHash   string    `json:"specHash,omitempty"`
	ConfigHash string    `json:"configHash,omitempty"`
	Message    string    `json:"message,omitempty"`
	Node       string    `json:"node,omitempty"`
	UpdatedAt  time.Time `json:"updatedAt,omitempty"`
	// Nodes holds one report per placed node, sorted by node name.
	Nodes []NodeStatus `json:"nodes,omitempty"`
	// Holder is the node whose report says VRRP MASTER: the one that
	// holds the addresses; empty when none does (no VRRP, or between
	// roles).
	Holder string `json:"holder,omitempty"`
	// History lists the last MaxHistory changes of Holder, oldest first:
	// what an operator asks first after a page ("did it fail over, and
	// when?").
	History []HolderChange `json:"history,omitempty"`
}

// MaxHistory bounds Status.History: ten entries say whether a pair flaps
// and keep the status object small (about 100 bytes an entry).
const MaxHistory = 10

// HolderChange is one change of Status.Holder. At is the time of the
// newest report when the change was seen (Summarize reads no clock).
type HolderChange struct {
	At   time.Time `json:"at"`
	From string    `json:"from,omitempty"`
	To   string    `json:"to,omitempty"`
}

// NodeStatus is what the agent of one node reports for a LoadBalancer.
type NodeStatus struct {
	Node  string `json:"node"`
	State State  `json:"state"`
	// SpecHash is the SpecHash of the spec this node last applied
	// successfully; after a failed apply it still names what serves.
	SpecHash   string `json:"specHash,omitempty"`
	ConfigHash string `json:"configHash,omitempty"`
	Message    string `json:"message,omitempty"`
	// VRRP is this node's role for the LoadBalancer's addresses when the
	// agent holds them with VRRP (--vrrp-interface); empty otherwise.
	VRRP VRRPState `json:"vrrp,omitempty"`
	// BGP is what this node advertises for the LoadBalancer's addresses
	// when the agent speaks BGP (--bgp-peer): BGPPreferred (the active
	// node), BGPAdvertised (the standby), BGPECMP (one of the nodes of an
	// ECMP placement, all equal) or BGPWithdrawn (its data plane is not
	// serving, or the node drains); empty otherwise.
	BGP BGPState `json:"bgp,omitempty"`
	// Reloads and RuntimeUpdates count the HAProxy reloads and the
	// runtime API updates this node's agent made for the LoadBalancer
	// since it started: many reloads where runtime updates were expected
	// is what a config churn looks like.
	Reloads        uint64 `json:"reloads,omitempty"`
	RuntimeUpdates uint64 `json:"runtimeUpdates,omitempty"`
	// MembersUp of Members are the pool members that HAProxy on this node
	// sees up (its health checks pass), read every 2 s, up to every 10 s
	// on a node of more than 200 load balancers.
	MembersUp int `json:"membersUp,omitempty"`
	Members   int `json:"members,omitempty"`
	// MembersDown are the members HAProxy on this node sees down (its
	// health checks fail, or it is not running), as address:port,
	// sorted: the first MaxMembersDown of them.
	MembersDown []string `json:"membersDown,omitempty"`
	// RequestsPerSecond is the rate of HTTP requests the listeners took
	// on this node, and ErrorShare the share of them answered with a 5xx
	// (0 to 1), over the agent's last rate window (10 s in pier run,
	// --report-rates-every in Kubernetes mode), each rounded to two
	// significant figures so that a report is written again only when
	// they change by that much.
	RequestsPerSecond float64 `json:"requestsPerSecond,omitempty"`
	ErrorShare        float64 `json:"errorShare,omitempty"`
	// RecentErrors are the kinds of 5xx answer the load balancer gave on
	// this node most recently, newest first, at most MaxRecentErrors,
	// each Bounded: read from the access-log lines, and taken with the
	// rates once a rate window, so that a stream of errors is one report
	// a window, not one per error.
	RecentErrors []RequestError `json:"recentErrors,omitempty"`
	UpdatedAt    time.Time      `json:"updatedAt,omitempty"`
}

// MaxMembersDown bounds NodeStatus.MembersDown: enough to say which
// members to look at, and a status object stays small when a whole
// Service of thousands is down (Members - MembersUp still counts them).
const MaxMembersDown = 10

// Equal reports whether r and o say the same (a NodeStatus holds a
// slice, so == does not compile).
func (r NodeStatus) Equal(o NodeStatus) bool { return reflect.DeepEqual(r, o) }

// VRRPState is a node's role for a LoadBalancer's addresses.
type VRRPState string

const (
	// VRRPMaster: this node holds the addresses and serves them.
	VRRPMaster VRRPState = "MASTER"
	// VRRPBackup: HAProxy is hot here, ready to take the addresses over.
	VRRPBackup VRRPState = "BACKUP"
	// VRRPFault: this node may not hold the addresses (its HAProxy is not
	// healthy, it drains, or the API server fenced it in a split brain).
	VRRPFault VRRPState = "FAULT"
)

// Report returns the report of node, if it has made one.
func (s *Status) Report(node string) (NodeStatus, bool) {
	for _, r := range s.Nodes {
		if r.Node == node {
			return r, true
		}
	}
	return NodeStatus{}, false
}

// WithReport returns the status with r replacing node r.Node's report,
// summarised for placement p. A report from a node that p does not name is
// dropped: it comes from an agent that has not yet seen the LoadBalancer
// move away, and would otherwise stay in the status forever.
func (s Status) WithReport(r NodeStatus, p Placement) Status {
	nodes := make([]NodeStatus, 0, len(s.Nodes)+1)
	for _, old := range s.Nodes {
		if old.Node != r.Node {
			nodes = append(nodes, old)
		}
	}
	s.Nodes = append(nodes, r)
	return s.Summarize(p)
}

// Summarize drops the reports of nodes that p does not name, sorts the
// rest, and copies the active node's report into the summary fields. With
// no report from the active node yet, the LoadBalancer is PENDING there.
// s is the previous status with the new reports: when the holder they
// name differs from s.Holder, the change is appended to the history.
// Summarizing a summary changes nothing.
func (s Status) Summarize(p Placement) Status {
	var nodes []NodeStatus
	for _, r := range s.Nodes {
		if p.Has(r.Node) {
			nodes = append(nodes, r)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node < nodes[j].Node })
	out := Status{State: StatePending, Nodes: nodes}
	if active, ok := out.Report(p.Active); ok {
		out.Node, out.State, out.SpecHash, out.ConfigHash = active.Node, active.State, active.SpecHash, active.ConfigHash
		out.Message, out.UpdatedAt = active.Message, active.UpdatedAt
	}
	out.Holder, out.History = s.Holder, s.History
	if h := holderOf(nodes, p); h != s.Holder {
		out.Holder = h
		out.History = appendChange(s.History, HolderChange{At: changedAt(s), From: s.Holder, To: h})
	}
	return out
}

// holderOf is the node whose report says MASTER. Two MASTERs (a split
// brain the API server has not fenced yet) name the active node if it is
// one of them, else the first by name, so the result does not depend on
// the order reports arrived in.
func holderOf(nodes []NodeStatus, p Placement) string {
	holder := ""
	for _, r := range nodes {
		if r.VRRP != VRRPMaster {
			continue
		}
		if r.Node == p.Active {
			return r.Node
		}
		if holder == "" {
			holder = r.Node
		}
	}
	return holder
}

// changedAt dates a change of holder: the newest report of s, the
// reports of nodes the placement just dropped included (the report that
// changed the holder is the newest one), and never before the last
// change. A change made by a placement change alone has no report of its
// own and takes the newest one before it: Summarize reads no clock, so
// that a store that summarises on every read (kube) reads the same
// history every time.
func changedAt(s Status) time.Time {
	var at time.Time
	if n := len(s.History); n > 0 {
		at = s.History[n-1].At
	}
	for _, r := range s.Nodes {
		if r.UpdatedAt.After(at) {
			at = r.UpdatedAt
		}
	}
	return at
}

// appendChange returns history with c appended, keeping the last
// MaxHistory entries, in a new slice: history may be shared with the
// status it came from.
func appendChange(history []HolderChange, c HolderChange) []HolderChange {
	if len(history) >= MaxHistory {
		history = history[len(history)-MaxHistory+1:]
	}
	out := make([]HolderChange, 0, len(history)+1)
	return append(append(out, history...), c)
}

// Serving reports whether the active node runs this exact spec.
func (lb *LoadBalancer) Serving() bool {
	return lb.Status.State == StateActive && lb.Status.SpecHash == lb.SpecHash()
}
