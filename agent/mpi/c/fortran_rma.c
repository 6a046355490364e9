/* fortran_rma.c: Open MPI's Fortran bindings of the one-sided calls (see fortran.c for why
 * only Open MPI needs them). Sizes and displacements are INTEGER(KIND=MPI_ADDRESS_KIND):
 * MPI_Aint. */
#include "wrap.h"

#ifdef OPEN_MPI

#include "fwrap.h"

#define WIN(x) MPI_Win_f2c(*(x))

void mpi_win_create_(void *base, MPI_Aint *size, F *disp, F *info, F *c, F *win, F *e) {
    MPI_Win w = MPI_WIN_NULL;
    *e = rtw_win_create(RT_CALLER, fbuf(base), *size, *disp, MPI_Info_f2c(*info), CM(c), &w);
    if (*e == MPI_SUCCESS) *win = MPI_Win_c2f(w);
}
F08(mpi_win_create_, ompi_win_create_f)

/* `base` receives the window's address: an INTEGER(KIND=MPI_ADDRESS_KIND) or, in the
 * _cptr form, a TYPE(C_PTR); MPI writes a pointer into either. */
void mpi_win_allocate_(MPI_Aint *size, F *disp, F *info, F *c, void *base, F *win, F *e) {
    MPI_Win w = MPI_WIN_NULL;
    *e = rtw_win_allocate(RT_CALLER, *size, *disp, MPI_Info_f2c(*info), CM(c), base, &w);
    if (*e == MPI_SUCCESS) *win = MPI_Win_c2f(w);
}
F08(mpi_win_allocate_, ompi_win_allocate_f)
F08(mpi_win_allocate_, mpi_win_allocate_cptr_)
F08(mpi_win_allocate_, ompi_win_allocate_cptr_f)

void mpi_win_free_(F *win, F *e) {
    MPI_Win w = WIN(win);
    *e = rtw_win_free(RT_CALLER, &w);
    if (*e == MPI_SUCCESS) *win = MPI_Win_c2f(w);
}
F08(mpi_win_free_, ompi_win_free_f)

void mpi_win_fence_(F *a, F *win, F *e) { *e = rtw_win_sync(RT_CALLER, RT_FENCE, *a, WIN(win)); }
F08(mpi_win_fence_, ompi_win_fence_f)

void mpi_win_lock_all_(F *a, F *win, F *e) {
    *e = rtw_win_sync(RT_CALLER, RT_LOCK_ALL, *a, WIN(win));
}
F08(mpi_win_lock_all_, ompi_win_lock_all_f)

void mpi_win_unlock_all_(F *win, F *e) {
    *e = rtw_win_sync(RT_CALLER, RT_UNLOCK_ALL, 0, WIN(win));
}
F08(mpi_win_unlock_all_, ompi_win_unlock_all_f)

void mpi_win_flush_all_(F *win, F *e) {
    *e = rtw_win_sync(RT_CALLER, RT_FLUSH_ALL, 0, WIN(win));
}
F08(mpi_win_flush_all_, ompi_win_flush_all_f)

void mpi_win_complete_(F *win, F *e) { *e = rtw_win_sync(RT_CALLER, RT_COMPLETE, 0, WIN(win)); }
F08(mpi_win_complete_, ompi_win_complete_f)

void mpi_win_wait_(F *win, F *e) { *e = rtw_win_sync(RT_CALLER, RT_WAIT, 0, WIN(win)); }
F08(mpi_win_wait_, ompi_win_wait_f)

void mpi_win_lock_(F *type, F *rank, F *a, F *win, F *e) {
    *e = rtw_win_target(RT_CALLER, RT_LOCK, *type, *rank, *a, WIN(win));
}
F08(mpi_win_lock_, ompi_win_lock_f)

void mpi_win_unlock_(F *rank, F *win, F *e) {
    *e = rtw_win_target(RT_CALLER, RT_UNLOCK, 0, *rank, 0, WIN(win));
}
F08(mpi_win_unlock_, ompi_win_unlock_f)

void mpi_win_flush_(F *rank, F *win, F *e) {
    *e = rtw_win_target(RT_CALLER, RT_FLUSH, 0, *rank, 0, WIN(win));
}
F08(mpi_win_flush_, ompi_win_flush_f)

void mpi_win_post_(F *g, F *a, F *win, F *e) {
    *e = rtw_win_group(RT_CALLER, 0, MPI_Group_f2c(*g), *a, WIN(win));
}
F08(mpi_win_post_, ompi_win_post_f)

void mpi_win_start_(F *g, F *a, F *win, F *e) {
    *e = rtw_win_group(RT_CALLER, 1, MPI_Group_f2c(*g), *a, WIN(win));
}
F08(mpi_win_start_, ompi_win_start_f)

void mpi_put_(void *o, F *oc, F *ot, F *target, MPI_Aint *disp, F *tc, F *tt, F *win, F *e) {
    *e = rtw_rma(RT_CALLER, RT_PUT, fbuf(o), *oc, TY(ot), *target, *disp, *tc, TY(tt),
                 MPI_OP_NULL, WIN(win));
}
F08(mpi_put_, ompi_put_f)

void mpi_get_(void *o, F *oc, F *ot, F *target, MPI_Aint *disp, F *tc, F *tt, F *win, F *e) {
    *e = rtw_rma(RT_CALLER, RT_GET, fbuf(o), *oc, TY(ot), *target, *disp, *tc, TY(tt),
                 MPI_OP_NULL, WIN(win));
}
F08(mpi_get_, ompi_get_f)

void mpi_accumulate_(void *o, F *oc, F *ot, F *target, MPI_Aint *disp, F *tc, F *tt, F *op,
                     F *win, F *e) {
    *e = rtw_rma(RT_CALLER, RT_ACCUMULATE, fbuf(o), *oc, TY(ot), *target, *disp, *tc, TY(tt),
                 OP(op), WIN(win));
}
F08(mpi_accumulate_, ompi_accumulate_f)

#else
/* MPICH: no Fortran symbols (see fortran.c). ISO C wants a declaration in every file. */
typedef int rt_no_fortran_one_sided;
#endif
