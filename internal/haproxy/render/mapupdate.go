package render

import (
	"bytes"
	"crypto/sha256"
	"strconv"

	"pier.dev/pier/internal/encode"
)

// Routes through the runtime API. A change that only adds, removes or
// re-points routes of a mapped listener (an Ingress joining a group with
// a Service the group already has, a host added to an Ingress, a path
// removed) differs from what runs in the contents of its exact and
// prefix map files alone. HAProxy can take those entries with `add map`,
// `set map` and `del map` instead of a reload: map_str is a tree and
// map_beg a longest-match tree, so where an entry lands in the map does
// not matter (TestIntegrationRouteUpdate checks both against a real
// HAProxy).
//
// A map file is named by its digest (routeMapFiles), and HAProxy knows a
// map by the file it loaded it from. After a runtime update the fragment
// names the new file while the process still knows the old name, so a
// Result records, per map, the name the running process knows it by
// (runningNames, spares.go), until the next load of the fragment
// (Reloaded).

// mapEntry is one line of an exact or prefix map file. pool is set when
// the value is that pool's backend name, which a pool running in a
// spare replaces by the spare's.
type mapEntry struct {
	key, value encode.Word
	pool       string
}

// mapLabel names a map of a listener independently of its digest.
func mapLabel(port int, class hostClass, kind int) string {
	return strconv.Itoa(port) + " " + mapName(class, kind)
}

// routeSkeletonOf hashes the fragment without its server lines and with
// its exact and prefix map files named by label instead of digest: two
// results with equal route skeletons differ only in members and in the
// entries of those maps.
func routeSkeletonOf(fragment []byte, v *view) [sha256.Size]byte {
	for _, l := range v.listeners {
		if l.routes == nil {
			continue
		}
		for c := range nClasses {
			for kind := range kindRegex {
				if p := l.routes.paths[c][kind]; p != "" {
					fragment = bytes.ReplaceAll(fragment, []byte(p), []byte("<"+mapLabel(l.port, hostClass(c), kind)+">"))
				}
			}
		}
	}
	return skeletonOf(withoutSpareFits(fragment, v))
}

// runningMapName is the name the running HAProxy knows a map by.
func (r *Result) runningMapName(label, path string) string {
	if name, ok := r.names.maps[label]; ok {
		return name
	}
	return path
}

// RunsWith records that HAProxy runs r after p's runtime commands: its
// maps and pools keep the names the process knows them by.
func (r *Result) RunsWith(p Plan) {
	r.names = p.names
}

// RunsAs records that r runs where old ran, unchanged (the same
// fragment): the process knows its maps and pools by old's names.
func (r *Result) RunsAs(old *Result) {
	if old != nil {
		r.names = old.names
	}
}

// Reloaded records that HAProxy loaded r's fragment: it knows every map
// and pool by r's own names.
func (r *Result) Reloaded() {
	r.names = runningNames{}
}

// routeCommands turns the map entries old runs with into new's, or says
// why that needs a reload. The caller has checked that the two differ
// in members, pools that fit spares and map entries only (route
// skeletons equal), and has given new pools their spares in names,
// where it also records the maps' running names for new (see RunsWith).
func routeCommands(old, new *Result, names *runningNames) ([]encode.Command, string) {
	ov, nv := old.view, new.view
	var cmds []encode.Command
	for i := range nv.listeners {
		ol, nl := &ov.listeners[i], &nv.listeners[i]
		if ol.routes == nil || nl.routes == nil {
			return nil, "listener " + strconv.Itoa(nl.port) + " routes by rules, not maps"
		}
		for c := range nClasses {
			for kind := range kindRegex {
				label := mapLabel(nl.port, hostClass(c), kind)
				name := old.runningMapName(label, ol.routes.paths[c][kind])
				if name == "" {
					continue // neither has the map (equal skeletons)
				}
				if name != nl.routes.paths[c][kind] {
					if names.maps == nil {
						names.maps = map[string]string{}
					}
					names.maps[label] = name
				}
				if bytes.Equal(ol.routes.files[c][kind], nl.routes.files[c][kind]) {
					continue
				}
				mc, err := entryCommands(encode.FilePath(name), ol.routes.entries[c][kind], nl.routes.entries[c][kind],
					func(e mapEntry) encode.Word {
						if e.pool != "" {
							return names.backend(nv.uuid, e.pool)
						}
						return e.value
					})
				if err != nil {
					return nil, err.Error()
				}
				cmds = append(cmds, mc...)
			}
		}
	}
	return cmds, ""
}

// entryCommands moves a map from the entries was to now: new keys are
// added, changed ones set, gone ones deleted, each with the value
// running gives it. Each key appears once in a map file (buildRoutes
// keeps a key's first policy).
func entryCommands(file encode.Word, was, now []mapEntry, running func(mapEntry) encode.Word) ([]encode.Command, error) {
	before := make(map[string]mapEntry, len(was))
	for _, e := range was {
		before[e.key.String()] = e
	}
	var cmds []encode.Command
	add := func(c encode.Command, err error) error {
		if err == nil {
			cmds = append(cmds, c)
		}
		return err
	}
	kept := make(map[string]bool, len(now))
	for _, e := range now {
		k := e.key.String()
		kept[k] = true
		prev, ok := before[k]
		var err error
		switch {
		case !ok:
			err = add(encode.AddMap(file, e.key, running(e)))
		case prev.value.String() != e.value.String():
			err = add(encode.SetMap(file, e.key, running(e)))
		}
		if err != nil {
			return nil, err
		}
	}
	for _, e := range was {
		if !kept[e.key.String()] {
			if err := add(encode.DelMap(file, e.key)); err != nil {
				return nil, err
			}
		}
	}
	return cmds, nil
}
