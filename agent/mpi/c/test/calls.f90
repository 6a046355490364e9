! calls.f90: covered calls from Fortran (`use mpi`), for run.sh to check that each is
! reported exactly once under both implementations. Needs at least 2 ranks.
program calls
  use mpi
  implicit none
  integer :: rank, size, ierr, i, total, b, x
  integer :: reqs(16), vals(16)
  integer :: st(MPI_STATUS_SIZE), msg
  logical :: flag
  integer :: win
  ! Written by other ranks between fences: the compiler must not keep it in registers.
  integer, volatile :: cells(4)
  integer(kind=MPI_ADDRESS_KIND) :: wsize, disp
  double precision :: out, got

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)

  if (rank == 0) then
    do i = 1, size - 1
      call MPI_Irecv(vals(i), 1, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, &
                     MPI_COMM_WORLD, reqs(i), ierr)
    end do
    call MPI_Waitall(size - 1, reqs, MPI_STATUSES_IGNORE, ierr)
    if (sum(vals(1:size-1)) /= 10 * size * (size - 1) / 2) call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  else
    x = 10 * rank
    call MPI_Send(x, 1, MPI_INTEGER, 0, 100 + rank, MPI_COMM_WORLD, ierr)
  end if
  ! No later message may reach the wildcard receives.
  call MPI_Barrier(MPI_COMM_WORLD, ierr)

  out = rank
  call MPI_Sendrecv(out, 1, MPI_DOUBLE_PRECISION, mod(rank + 1, size), 7, got, 1, &
                    MPI_DOUBLE_PRECISION, mod(rank + size - 1, size), 7, MPI_COMM_WORLD, st, ierr)
  if (int(got) /= mod(rank + size - 1, size) .or. st(MPI_SOURCE) /= mod(rank + size - 1, size)) &
    call MPI_Abort(MPI_COMM_WORLD, 2, ierr)

  b = 0
  if (rank == 0) b = 42
  call MPI_Bcast(b, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  x = rank
  call MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  total = size * (size - 1) / 2
  if (b /= 42 .or. x /= total) call MPI_Abort(MPI_COMM_WORLD, 3, ierr)

  ! Nonblocking collectives, and a persistent ring (to the right, from the left).
  call MPI_Ibarrier(MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Wait(reqs(1), st, ierr)
  b = 0
  if (rank == 0) b = 43
  call MPI_Ibcast(b, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, reqs(1), ierr)
  x = rank
  call MPI_Iallreduce(MPI_IN_PLACE, x, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(2), ierr)
  i = 0
  call MPI_Ireduce(rank, i, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, reqs(3), ierr)
  call MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE, ierr)
  if (b /= 43 .or. x /= total .or. (rank == 0 .and. i /= total)) call MPI_Abort(MPI_COMM_WORLD, 4, ierr)
  x = rank + 1
  call MPI_Iscan(x, i, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Igather(rank, 1, MPI_INTEGER, vals, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  if (i /= (rank + 1) * (rank + 2) / 2 .or. (rank == 0 .and. vals(size) /= size - 1)) &
    call MPI_Abort(MPI_COMM_WORLD, 8, ierr)
  x = rank
  call MPI_Send_init(x, 1, MPI_INTEGER, mod(rank + 1, size), 12, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Recv_init(b, 1, MPI_INTEGER, mod(rank + size - 1, size), 12, MPI_COMM_WORLD, &
                     reqs(2), ierr)
  call MPI_Start(reqs(2), ierr)
  call MPI_Start(reqs(1), ierr)
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  call MPI_Startall(2, reqs, ierr)
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  call MPI_Request_free(reqs(1), ierr)
  call MPI_Request_free(reqs(2), ierr)
  if (b /= mod(rank + size - 1, size)) call MPI_Abort(MPI_COMM_WORLD, 5, ierr)

  ! Matched probes around the ring: a blocking one, then a polling one.
  x = rank + 100
  call MPI_Isend(x, 1, MPI_INTEGER, mod(rank + 1, size), 13, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Mprobe(mod(rank + size - 1, size), 13, MPI_COMM_WORLD, msg, st, ierr)
  call MPI_Mrecv(b, 1, MPI_INTEGER, msg, st, ierr)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
  if (b /= mod(rank + size - 1, size) + 100) call MPI_Abort(MPI_COMM_WORLD, 6, ierr)
  call MPI_Isend(x, 1, MPI_INTEGER, mod(rank + 1, size), 14, MPI_COMM_WORLD, reqs(1), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Improbe(mod(rank + size - 1, size), 14, MPI_COMM_WORLD, flag, msg, st, ierr)
  end do
  call MPI_Imrecv(b, 1, MPI_INTEGER, msg, reqs(2), ierr)
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  if (b /= mod(rank + size - 1, size) + 100) call MPI_Abort(MPI_COMM_WORLD, 7, ierr)

  ! One-sided: a put to the right neighbour between fences, a get under a lock.
  cells = -1
  wsize = 4 * 4
  call MPI_Win_create(cells, wsize, 4, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  disp = 0
  call MPI_Put(rank, 1, MPI_INTEGER, mod(rank + 1, size), disp, 1, MPI_INTEGER, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  if (cells(1) /= mod(rank + size - 1, size)) call MPI_Abort(MPI_COMM_WORLD, 9, ierr)
  call MPI_Win_lock(MPI_LOCK_SHARED, mod(rank + 1, size), 0, win, ierr)
  call MPI_Get(x, 1, MPI_INTEGER, mod(rank + 1, size), disp, 1, MPI_INTEGER, win, ierr)
  call MPI_Win_unlock(mod(rank + 1, size), win, ierr)
  if (x /= rank) call MPI_Abort(MPI_COMM_WORLD, 10, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Win_free(win, ierr)

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a)', 'calls.f90: ok'
  call MPI_Finalize(ierr)
end program calls
