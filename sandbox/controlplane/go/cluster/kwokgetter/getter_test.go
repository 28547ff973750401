// Package kwokgetter tests kwok's dynamic getter, with the patch binaries.py carries on it: kwok
// reads its Stages (and its Logs, Execs, ...) through it, and caches what it read under the
// informer's last resource version. The reflector sets that version before the informer's store
// holds the listed objects, so a read in between was cached as the answer for good: the sandbox's
// kwok once started with no Stage at all, and its nodes never became Ready.
package kwokgetter

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/kwok/pkg/config/resources"
)

// listed holds n ConfigMaps. client-go's reflector asks a watch to send them first (a watch-list,
// as it asks kube-apiserver), and lists when a watch does not.
type listed struct{ n int }

func (l listed) items() []corev1.ConfigMap {
	items := make([]corev1.ConfigMap, l.n)
	for i := range items {
		items[i].Name, items[i].Namespace, items[i].ResourceVersion = fmt.Sprintf("cm-%d", i), "default", "1"
	}
	return items
}

func (l listed) List(context.Context, metav1.ListOptions) (*corev1.ConfigMapList, error) {
	return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: l.items()}, nil
}

func (l listed) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	stream := watch.NewFakeWithChanSize(l.n+1, false)
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		for _, item := range l.items() {
			stream.Add(&item)
		}
		stream.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1",
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	}
	return stream, nil
}

func (listed) UpdateStatus(_ context.Context, obj *corev1.ConfigMap, _ metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	return obj, nil
}

// TestEveryListedObjectIsReadOnceSignalled reads the getter as kwok's StagesManager does (at each
// signal), with another reader in a loop meanwhile, as kwok's other readers may: once the signals
// stop, the last read must hold every listed object.
func TestEveryListedObjectIsReadOnceSignalled(t *testing.T) {
	const objects, rounds = 2000, 20
	for round := range rounds {
		ctx, cancel := context.WithCancel(context.Background())
		getter := resources.NewDynamicGetter[int, *corev1.ConfigMap, *corev1.ConfigMapList](
			listed{objects}, func(objs []*corev1.ConfigMap) int { return len(objs) })
		if err := getter.Start(ctx); err != nil {
			t.Fatal(err)
		}
		go func() {
			for ctx.Err() == nil {
				getter.Get()
			}
		}()
		read, quiet := 0, time.NewTimer(time.Minute)
		for read != objects {
			select {
			case <-getter.Sync():
				read = getter.Get()
			case <-quiet.C:
				cancel()
				t.Fatalf("round %d: %d of %d objects read after the last signal", round, read, objects)
			}
		}
		quiet.Stop()
		cancel()
	}
}
