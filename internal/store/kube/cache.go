package kube

import (
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// maxCached bounds the cache. Objects deleted by other processes are never
// forgotten one by one, so rather than track them the cache starts over
// when it grows past this (costing one read per object afterwards).
const maxCached = 16384

// objectCache holds, per UUID, the object as this store last wrote or read
// it. Writes go on top of it, saving a read per write, and its
// resourceVersion is the precondition: if anyone else wrote since, the write
// conflicts and the store reads again. Callers never modify what get
// returns (writes deep-copy first).
type objectCache struct {
	mu sync.Mutex
	m  map[string]*unstructured.Unstructured
}

func (c *objectCache) get(uuid string) *unstructured.Unstructured {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[uuid]
}

func (c *objectCache) put(u *unstructured.Unstructured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[string]*unstructured.Unstructured{}
	}
	c.m[u.GetName()] = u
}

func (c *objectCache) forget(uuid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, uuid)
}

// offer caches u unless the copy cached is newer: refresh for an object
// the cache is to hold even before this store writes it.
func (c *objectCache) offer(u *unstructured.Unstructured) {
	c.mu.Lock()
	cur, ok := c.m[u.GetName()]
	c.mu.Unlock()
	if !ok || newerVersion(u.GetResourceVersion(), cur.GetResourceVersion()) {
		c.put(u)
	}
}

// refresh replaces the cached copy of u's object with u when u is newer:
// the watch delivers what other processes wrote (an agent's report, the
// controller's spec), and a write on top of the copy it replaces would
// only conflict, then read, then write again. Objects not cached stay
// uncached: an agent watches every LoadBalancer and writes few of them.
// A copy the watch has not caught up with (this store's own newer
// write) is kept: resourceVersions are etcd's revisions, compared as
// numbers; one that is not a number is never taken for newer.
func (c *objectCache) refresh(u *unstructured.Unstructured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.m[u.GetName()]
	if ok && newerVersion(u.GetResourceVersion(), cur.GetResourceVersion()) {
		c.m[u.GetName()] = u
	}
}

func newerVersion(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}
