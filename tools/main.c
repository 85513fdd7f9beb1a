/*
 * main.c: the `labelprof` program: lp_main() (tools/labelprof.c) is the
 * whole command, kept apart from main() so that the fuzz targets run it in
 * their own process as users run it.
 */
#include "config.h"

#include "cmd.h"

int main(int argc, char **argv) { return lp_main(argc, argv); }
