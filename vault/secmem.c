/* Locked memory for secrets, kept for the next connection.
 *
 * Every buffer that holds a credential or one of its encodings comes from
 * sodium_malloc: locked, between guard pages, wiped when freed. Each
 * allocation maps its pages, protects two of them and locks the rest, and
 * each free undoes all of it: about ten system calls and a page fault per
 * page, paid again by every new connection for its request buffer and its
 * kept patterns (bench/report-notes.md, "New connections through the
 * vault"). A chunk given back is wiped at once and kept, still locked and
 * guarded, for the next request of the same size; the cache is bounded,
 * and what does not fit goes back to libsodium. */
#include "vault/vault_int.h"

#include <sodium.h>

#define SECMEM_SLOTS 32
#define SECMEM_MAX   ((size_t)4 << 20) /* bytes kept, all slots */

static struct {
	void *p;
	size_t size;
} cache[SECMEM_SLOTS];
static size_t cached;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

void *secmem_alloc(size_t size)
{
	pthread_mutex_lock(&cache_lock);
	for (size_t i = 0; i < SECMEM_SLOTS; i++)
		if (cache[i].p && cache[i].size == size) {
			void *p = cache[i].p;

			cache[i].p = NULL;
			cached -= size;
			pthread_mutex_unlock(&cache_lock);
			return p;
		}
	pthread_mutex_unlock(&cache_lock);
	return sodium_malloc(size);
}

void secmem_free(void *p, size_t size)
{
	if (!p)
		return;
	/* wiped before it is kept: nothing of one connection waits in the
	 * cache for the next */
	sodium_memzero(p, size);
	pthread_mutex_lock(&cache_lock);
	if (cached + size <= SECMEM_MAX)
		for (size_t i = 0; i < SECMEM_SLOTS; i++)
			if (!cache[i].p) {
				cache[i].p = p;
				cache[i].size = size;
				cached += size;
				pthread_mutex_unlock(&cache_lock);
				return;
			}
	pthread_mutex_unlock(&cache_lock);
	sodium_free(p);
}
