package standalone

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/statedir"
	"pier.dev/pier/internal/store/bolt"
)

// lostStateHold is the shortest time addresses found in the state folder
// stay reserved when the database that recorded them is gone
// (reserveLeftovers). --address-quarantine 0 frees the addresses of a load
// balancer the operator deletes; nobody deleted these, so they are held
// for at least the quarantine's default.
const lostStateHold = 10 * time.Minute

// reserveLeftovers handles a state database that holds no load balancer
// while the agents' folders (dirs) still hold some: pier.db was deleted,
// emptied or moved aside, and the addresses it recorded would otherwise
// be handed out afresh, lowest first, so that another tenant's pin or a
// newcomer took a victim's floating IP while DNS still points at it.
//
// The folders are the node's own evidence of what each load balancer
// served on: the bind lines of its HAProxy fragment, or the native
// driver's saved spec. Each address is reserved for the UUID that held it
// (the UUID is derived from the object, so the same Ingress, group,
// Gateway or Service comes back under it) for the longer of
// --address-quarantine and lostStateHold. The load balancers still in
// the manifests get their addresses back in the first pass, whatever its
// order, and the others' addresses are kept as after a deletion, then
// freed. This is preferred to writing the evidence back into the store as
// load balancers: the folders do not record names, sources or
// placements, and a half-made load balancer in the store would be served
// or reported as if it were real. Nor does pier refuse to start: a lost
// database is a recoverable loss, and the operator is told in one warning
// what was reserved and until when.
func reserveLeftovers(ctx context.Context, st *bolt.Store, alloc *ipam.Allocator, dirs []string,
	quarantine time.Duration, logger *slog.Logger) error {
	stored, err := st.List(ctx)
	if err != nil {
		return fmt.Errorf("read state file %s: %w", st.Path(), err)
	}
	if len(stored) > 0 {
		return nil
	}
	var left []statedir.Leftover
	for _, d := range dirs {
		l, err := statedir.Leftovers(d)
		if err != nil {
			return err
		}
		left = append(left, l...)
	}
	if len(left) == 0 {
		return nil
	}
	until := time.Now().Add(max(quarantine, lostStateHold))
	var addrs []string
	for _, l := range left {
		alloc.Reserve(l.UUID, l.Name, l.Addrs, until)
		for _, a := range l.Addrs {
			addrs = append(addrs, a.String())
		}
	}
	logger.Warn("the state file holds no load balancer but the state folder holds some from an earlier run: "+
		"the file was lost or replaced. Their addresses are reserved for them (the same Ingress, group, Gateway "+
		"or Service gets its own back) and given to no other until the reservation ends "+
		"(docs/operations.md, \"pier.db lost or damaged\")",
		"file", st.Path(), "load_balancers", len(left), "addresses", addrs,
		"reserved_until", until.UTC().Format(time.RFC3339))
	return nil
}
