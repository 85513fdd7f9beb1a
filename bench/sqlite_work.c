/*
 * sqlite_work.c: what an application asks of SQLite, for bench/sqlite.sh,
 * which builds it against a plain and a labelled sqlite3.c (it is not built
 * by make).
 *
 *   sqlite_work DBFILE N
 *
 * On a new database file: two tables and an index; N orders inserted in
 * transactions of 500; N point lookups by key; N/4 lookups through the
 * index; N/50 range scans; N/100 sorted range reads and N/100 joins grouped
 * and sorted (the sorter); N/20 queries prepared from new text each time;
 * N/4 updates and N/100 small deletes in transactions. Statements are
 * prepared once and reused, as applications do, except the ad hoc queries.
 * Prints a checksum of every value read and, in the build that counts
 * (-DSQLITE_WORK_COUNT), how often each labelled function was entered.
 * Deterministic: the same N gives the same statements and the same checksum.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite3.h"

#define BATCH 500

static uint64_t sum = 0xcbf29ce484222325u;
static uint64_t rnd = 0x9e3779b97f4a7c15u;

static unsigned next_rand(unsigned n) {
  rnd ^= rnd << 13;
  rnd ^= rnd >> 7;
  rnd ^= rnd << 17;
  return (unsigned)(rnd % n);
}

static void mix(uint64_t v) {
  sum ^= v;
  sum *= 0x100000001b3u;
}

static void die(sqlite3 *db, const char *what) {
  fprintf(stderr, "sqlite_work: %s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
  exit(1);
}

static void exec(sqlite3 *db, const char *sql) {
  if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
    die(db, sql);
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
  sqlite3_stmt *s;
  if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
    die(db, sql);
  return s;
}

/* Steps s to its end, mixing every column of every row into the checksum. */
static void drain(sqlite3 *db, sqlite3_stmt *s) {
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    int n = sqlite3_column_count(s);
    for (int i = 0; i < n; i++) {
      if (sqlite3_column_type(s, i) == SQLITE_TEXT) {
        const unsigned char *t = sqlite3_column_text(s, i);
        for (int j = 0, len = sqlite3_column_bytes(s, i); j < len; j++)
          mix(t[j]);
      } else {
        mix((uint64_t)sqlite3_column_int64(s, i));
      }
    }
  }
  if (rc != SQLITE_DONE)
    die(db, sqlite3_sql(s));
  sqlite3_reset(s);
}

#ifdef SQLITE_WORK_COUNT
extern unsigned long long sqlite_work_calls[];
extern const char *const sqlite_work_names[];
extern const int sqlite_work_nnames;
#endif

int main(int argc, char **argv) {
  if (argc != 3 || atoi(argv[2]) < 1000) {
    fprintf(stderr, "usage: sqlite_work DBFILE N (N >= 1000)\n");
    return 2;
  }
  const char *path = argv[1];
  int n = atoi(argv[2]), ncust = n / 20;
  static const char *const cities[] = {"Lyon", "Oslo", "Porto", "Kyoto", "Quito", "Perth", "Accra", "Dakar"};
  sqlite3 *db;
  remove(path);
  if (sqlite3_open(path, &db) != SQLITE_OK)
    die(db, path);
  exec(db, "PRAGMA synchronous=OFF");
  exec(db, "CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT, city TEXT)");
  exec(db, "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, day INTEGER, amount INTEGER, note TEXT)");
  exec(db, "CREATE INDEX orders_customer ON orders(customer, day)");

  sqlite3_stmt *ins_c = prepare(db, "INSERT INTO customer VALUES(?, ?, ?)");
  sqlite3_stmt *ins_o = prepare(db, "INSERT INTO orders VALUES(?, ?, ?, ?, ?)");
  exec(db, "BEGIN");
  for (int i = 1; i <= ncust; i++) {
    char name[32];
    snprintf(name, sizeof name, "customer %d", i * 7919 % 100003);
    sqlite3_bind_int(ins_c, 1, i);
    sqlite3_bind_text(ins_c, 2, name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(ins_c, 3, cities[next_rand(8)], -1, SQLITE_STATIC);
    if (sqlite3_step(ins_c) != SQLITE_DONE)
      die(db, "insert customer");
    sqlite3_reset(ins_c);
  }
  exec(db, "COMMIT");
  for (int i = 1; i <= n; i++) {
    char note[48];
    if (i % BATCH == 1)
      exec(db, "BEGIN");
    snprintf(note, sizeof note, "order %u of batch %d", next_rand(1000000), i / BATCH);
    sqlite3_bind_int(ins_o, 1, i);
    sqlite3_bind_int(ins_o, 2, 1 + (int)next_rand((unsigned)ncust));
    sqlite3_bind_int(ins_o, 3, (int)next_rand(3650));
    sqlite3_bind_int(ins_o, 4, (int)next_rand(100000));
    sqlite3_bind_text(ins_o, 5, note, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(ins_o) != SQLITE_DONE)
      die(db, "insert order");
    sqlite3_reset(ins_o);
    if (i % BATCH == 0 || i == n)
      exec(db, "COMMIT");
  }

  sqlite3_stmt *get = prepare(db, "SELECT customer, day, amount, note FROM orders WHERE id = ?");
  for (int i = 0; i < n; i++) {
    sqlite3_bind_int(get, 1, 1 + (int)next_rand((unsigned)n));
    drain(db, get);
  }
  sqlite3_stmt *by_cust = prepare(db, "SELECT day, amount FROM orders WHERE customer = ? ORDER BY day");
  for (int i = 0; i < n / 4; i++) {
    sqlite3_bind_int(by_cust, 1, 1 + (int)next_rand((unsigned)ncust));
    drain(db, by_cust);
  }
  sqlite3_stmt *range = prepare(db, "SELECT count(*), sum(amount), max(day) FROM orders WHERE id BETWEEN ? AND ?");
  for (int i = 0; i < n / 50; i++) {
    int lo = 1 + (int)next_rand((unsigned)n);
    sqlite3_bind_int(range, 1, lo);
    sqlite3_bind_int(range, 2, lo + 200);
    drain(db, range);
  }
  sqlite3_stmt *sorted = prepare(db, "SELECT id, amount, note FROM orders WHERE id BETWEEN ? AND ? ORDER BY amount DESC, id");
  sqlite3_stmt *grouped = prepare(db,
                                  "SELECT c.city, count(*), sum(o.amount) FROM orders o JOIN customer c ON c.id = o.customer"
                                  " WHERE o.id BETWEEN ? AND ? GROUP BY c.city ORDER BY 3 DESC");
  for (int i = 0; i < n / 100; i++) {
    int lo = 1 + (int)next_rand((unsigned)n);
    sqlite3_bind_int(sorted, 1, lo);
    sqlite3_bind_int(sorted, 2, lo + 150);
    drain(db, sorted);
    sqlite3_bind_int(grouped, 1, lo);
    sqlite3_bind_int(grouped, 2, lo + 150);
    drain(db, grouped);
  }
  for (int i = 0; i < n / 20; i++) {
    char sql[160];
    int c = 1 + (int)next_rand((unsigned)ncust);
    snprintf(sql, sizeof sql,
             "SELECT name, city, (SELECT count(*) FROM orders WHERE customer = %d) FROM customer WHERE id = %d", c, c);
    sqlite3_stmt *s = prepare(db, sql);
    drain(db, s);
    sqlite3_finalize(s);
  }
  sqlite3_stmt *upd = prepare(db, "UPDATE orders SET amount = amount + ?, day = ? WHERE id = ?");
  for (int i = 0; i < n / 4; i++) {
    if (i % BATCH == 0)
      exec(db, "BEGIN");
    sqlite3_bind_int(upd, 1, (int)next_rand(100));
    sqlite3_bind_int(upd, 2, (int)next_rand(3650));
    sqlite3_bind_int(upd, 3, 1 + (int)next_rand((unsigned)n));
    if (sqlite3_step(upd) != SQLITE_DONE)
      die(db, "update");
    sqlite3_reset(upd);
    if (i % BATCH == BATCH - 1 || i == n / 4 - 1)
      exec(db, "COMMIT");
  }
  sqlite3_stmt *del = prepare(db, "DELETE FROM orders WHERE id BETWEEN ? AND ?");
  exec(db, "BEGIN");
  for (int i = 0; i < n / 100; i++) {
    int lo = 1 + (int)next_rand((unsigned)n);
    sqlite3_bind_int(del, 1, lo);
    sqlite3_bind_int(del, 2, lo + 3);
    if (sqlite3_step(del) != SQLITE_DONE)
      die(db, "delete");
    sqlite3_reset(del);
  }
  exec(db, "COMMIT");
  sqlite3_stmt *total = prepare(db, "SELECT count(*), sum(amount) FROM orders");
  drain(db, total);

  sqlite3_stmt *all[] = {ins_c, ins_o, get, by_cust, range, sorted, grouped, upd, del, total};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    sqlite3_finalize(all[i]);
  if (sqlite3_close(db) != SQLITE_OK)
    die(db, "close");
  remove(path);
  printf("checksum %016llx\n", (unsigned long long)sum);
#ifdef SQLITE_WORK_COUNT
  for (int i = 0; i < sqlite_work_nnames; i++)
    printf("calls %s %llu\n", sqlite_work_names[i], sqlite_work_calls[i]);
#endif
  return 0;
}
