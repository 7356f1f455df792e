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
// (mapNames), until the next load of the fragment (Reloaded).

// mapEntry is one line of an exact or prefix map file.
type mapEntry struct {
	key, value encode.Word
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
	return skeletonOf(fragment)
}

// runningMapName is the name the running HAProxy knows a map by.
func (r *Result) runningMapName(label, path string) string {
	if name, ok := r.mapNames[label]; ok {
		return name
	}
	return path
}

// RunsWith records that HAProxy runs r after p's runtime commands: its
// maps keep the names the process loaded them by.
func (r *Result) RunsWith(p Plan) {
	r.mapNames = p.MapNames
}

// RunsAs records that r runs where old ran, unchanged (the same
// fragment): the process knows its maps by the names it knew old's by.
func (r *Result) RunsAs(old *Result) {
	if old != nil {
		r.mapNames = old.mapNames
	}
}

// Reloaded records that HAProxy loaded r's fragment: it knows every map
// by r's own file names.
func (r *Result) Reloaded() {
	r.mapNames = nil
}

// routeCommands turns the map entries old runs with into new's, or says
// why that needs a reload. The caller has checked that the two differ
// in members and map entries only (route skeletons equal). names are the
// maps' running names for new (see RunsWith).
func routeCommands(old, new *Result) (cmds []encode.Command, names map[string]string, why string) {
	ov, nv := old.view, new.view
	for i := range nv.listeners {
		ol, nl := &ov.listeners[i], &nv.listeners[i]
		if ol.routes == nil || nl.routes == nil {
			return nil, nil, "listener " + strconv.Itoa(nl.port) + " routes by rules, not maps"
		}
		for c := range nClasses {
			for kind := range kindRegex {
				label := mapLabel(nl.port, hostClass(c), kind)
				name := old.runningMapName(label, ol.routes.paths[c][kind])
				if name == "" {
					continue // neither has the map (equal skeletons)
				}
				if name != nl.routes.paths[c][kind] {
					if names == nil {
						names = map[string]string{}
					}
					names[label] = name
				}
				if bytes.Equal(ol.routes.files[c][kind], nl.routes.files[c][kind]) {
					continue
				}
				mc, err := entryCommands(encode.FilePath(name), ol.routes.entries[c][kind], nl.routes.entries[c][kind])
				if err != nil {
					return nil, nil, err.Error()
				}
				cmds = append(cmds, mc...)
			}
		}
	}
	return cmds, names, ""
}

// entryCommands moves a map from the entries was to now: new keys are
// added, changed ones set, gone ones deleted. Each key appears once in a
// map file (buildRoutes keeps a key's first policy).
func entryCommands(file encode.Word, was, now []mapEntry) ([]encode.Command, error) {
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
			err = add(encode.AddMap(file, e.key, e.value))
		case prev.value.String() != e.value.String():
			err = add(encode.SetMap(file, e.key, e.value))
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
