/* fwrap.h: private to the Open MPI Fortran bindings (fortran*.c): Fortran handles,
 * sentinels and the alias that serves `use mpi_f08`. */
#ifndef RACETRACK_FWRAP_H
#define RACETRACK_FWRAP_H

#include "wrap.h"

typedef MPI_Fint F;

/* Open MPI's Fortran sentinels: common blocks whose addresses stand for MPI_BOTTOM and
 * MPI_IN_PLACE. */
extern F mpi_fortran_bottom_, mpi_fortran_in_place_;

_Static_assert(sizeof(F) == sizeof(int), "Fortran INTEGER count arrays passed as int[]");
#define FSTATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(F)))

static inline void *fbuf(void *p) {
    if (p == (void *)&mpi_fortran_bottom_) return MPI_BOTTOM;
    if (p == (void *)&mpi_fortran_in_place_) return MPI_IN_PLACE;
    return p;
}

#define CM(x) MPI_Comm_f2c(*(x))
#define TY(x) MPI_Type_f2c(*(x))
#define OP(x) MPI_Op_f2c(*(x))
/* `use mpi_f08` calls ompi_x_f, the same function under another name. */
#define F08(name, f08) __typeof__(name) f08 __attribute__((alias(#name)));

#endif
