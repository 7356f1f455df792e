package kube

import (
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
