package shard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pkg/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// passLoop runs pass over c's objects until ctx is done, as the assigner and the unserved check
// do: it watches objs in c (any event wakes a pass), starts c, waits for it to sync, then runs
// pass at once, on every wake-up and when the delay pass returned ends, at most once per minGap
// (0: no gap). It returns nil once ctx is done, and an error naming what (a phrase for the
// message) when a watch cannot be set up or the cache stops on its own.
func passLoop(ctx context.Context, c cache.Cache, objs []client.Object, what string, minGap time.Duration,
	pass func(context.Context, client.Reader) time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	for _, obj := range objs {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		if kind == "" {
			kind = fmt.Sprintf("%T", obj)
		}
		inf, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return errors.Wrapf(err, "shard: %s: watch %s", what, kind)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return errors.Wrapf(err, "shard: %s: watch %s", what, kind)
		}
	}
	var wg sync.WaitGroup
	stopped := make(chan error, 1)
	wg.Go(func() { stopped <- c.Start(ctx) })
	defer wg.Wait() // after cancel, which runs first
	if !c.WaitForCacheSync(ctx) {
		return nil // ctx is done
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-stopped:
			return errors.Wrapf(err, "shard: the cache of the %s stopped", what)
		case <-wake:
		case <-timer.C:
		}
		timer.Reset(pass(ctx, c))
		if minGap <= 0 {
			continue
		}
		select { // events that come now are looked at after the gap, in one look
		case <-ctx.Done():
			return nil
		case <-time.After(minGap):
		}
	}
}
