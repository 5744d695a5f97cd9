/* Byte-budgeted LRU map (see lru.h). */
#include "lru.h"

xgr_chain *xgr_lru_first(const xgr_lru *l, uint64_t hash) {
    return l->nbuckets ? l->buckets[hash & (l->nbuckets - 1)] : NULL;
}

xgr_chain **xgr_lru_slot(xgr_lru *l, uint64_t hash) {
    return &l->buckets[hash & (l->nbuckets - 1)];
}

int xgr_lru_reserve(xgr_lru *l) {
    if ((l->count + 1) * 2 <= l->nbuckets) return 0;
    return xgr_chain_grow(&l->buckets, &l->nbuckets, l->first_buckets);
}

static void lru_unlink(xgr_lru *l, xgr_lru_node *n) {
    if (n->prev) n->prev->next = n->next;
    else l->head = n->next;
    if (n->next) n->next->prev = n->prev;
    else l->tail = n->prev;
    n->prev = n->next = NULL;
}

static void lru_push_front(xgr_lru *l, xgr_lru_node *n) {
    n->prev = NULL;
    n->next = l->head;
    if (l->head) l->head->prev = n;
    l->head = n;
    if (!l->tail) l->tail = n;
}

void xgr_lru_insert(xgr_lru *l, xgr_chain **slot, xgr_lru_node *n) {
    n->link.next = NULL;
    *slot = &n->link;
    lru_push_front(l, n);
    l->count++;
    l->bytes += n->bytes;
    xgr_lru_evict_to(l, l->budget);
}

void xgr_lru_touch(xgr_lru *l, xgr_lru_node *n) {
    if (l->head == n) return;
    lru_unlink(l, n);
    lru_push_front(l, n);
}

void xgr_lru_remove(xgr_lru *l, xgr_lru_node *n) {
    xgr_chain_unlink(l->buckets, l->nbuckets, &n->link);
    lru_unlink(l, n);
    l->count--;
    l->bytes -= n->bytes;
    l->drop(l, n);
}

void xgr_lru_evict_to(xgr_lru *l, size_t budget) {
    while (l->bytes > budget && l->tail) {
        xgr_lru_remove(l, l->tail);
        l->evictions++;
    }
}

void xgr_lru_set_budget(xgr_lru *l, size_t budget) {
    l->budget = budget;
    xgr_lru_evict_to(l, budget);
}
