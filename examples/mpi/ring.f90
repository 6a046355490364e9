! ring (Fortran): the C ring example with `use mpi`, printing the same JSON line.
!
! A token travels around the ranks `--rounds N` times with MPI_Send/MPI_Recv; every rank
! adds (rank + 1) * (round + 1) to it, and one MPI_Allreduce adds up what each rank added.
! Rank 0 compares both with the sequential reference. Under Open MPI these calls go
! through the Fortran bindings, not the C entry points: the case the interposer must
! count once. Exit codes: 0 match, 1 mismatch, 2 bad arguments.
program ring
  use mpi
  implicit none
  integer, parameter :: i8 = selected_int_kind(18)
  integer :: ierr, rank, nranks, code
  integer(i8) :: rounds, token, added, total, reference
  double precision :: t0, elapsed

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  call parse_args(rounds)

  t0 = MPI_Wtime()
  call pass_token(token, added)
  call MPI_Allreduce(added, total, 1, MPI_INTEGER8, MPI_SUM, MPI_COMM_WORLD, ierr)
  elapsed = MPI_Wtime() - t0

  code = 0
  if (rank == 0) then
    reference = reference_token()
    if (token /= reference .or. total /= reference) code = 1
    call report(token, reference, total, code == 0, elapsed)
  end if
  call MPI_Bcast(code, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
  if (code /= 0) call exit(code)

contains

  integer(i8) function contribution(r, round)
    integer, intent(in) :: r
    integer(i8), intent(in) :: round
    contribution = int(r + 1, i8) * (round + 1)
  end function contribution

  integer(i8) function reference_token()
    integer(i8) :: round
    integer :: r
    reference_token = 0
    do round = 0, rounds - 1
      do r = 0, nranks - 1
        reference_token = reference_token + contribution(r, round)
      end do
    end do
  end function reference_token

  ! The rounds; with one rank the ring is rank 0 alone (no send to itself).
  subroutine pass_token(token, added)
    integer(i8), intent(out) :: token, added
    integer(i8) :: round
    integer :: next, prev
    integer :: status(MPI_STATUS_SIZE)
    next = mod(rank + 1, nranks)
    prev = mod(rank + nranks - 1, nranks)
    token = 0
    added = 0
    do round = 0, rounds - 1
      if (nranks > 1 .and. rank /= 0) then
        call MPI_Recv(token, 1, MPI_INTEGER8, prev, 0, MPI_COMM_WORLD, status, ierr)
      end if
      token = token + contribution(rank, round)
      added = added + contribution(rank, round)
      if (nranks > 1) then
        call MPI_Send(token, 1, MPI_INTEGER8, next, 0, MPI_COMM_WORLD, ierr)
        if (rank == 0) then
          call MPI_Recv(token, 1, MPI_INTEGER8, prev, 0, MPI_COMM_WORLD, status, ierr)
        end if
      end if
    end do
    if (rank /= 0) token = 0
  end subroutine pass_token

  ! `--rounds N` (default 3); anything else: usage on rank 0's stderr, exit code 2.
  subroutine parse_args(rounds)
    use, intrinsic :: iso_fortran_env, only: error_unit
    integer(i8), intent(out) :: rounds
    character(len=64) :: arg
    integer :: n, ios
    rounds = 3
    n = command_argument_count()
    ios = 0
    if (n == 2) then
      call get_command_argument(1, arg)
      if (trim(arg) /= '--rounds') ios = 1
      call get_command_argument(2, arg)
      if (ios == 0) read (arg, *, iostat=ios) rounds
      if (ios == 0 .and. rounds < 0) ios = 1
    else if (n /= 0) then
      ios = 1
    end if
    if (ios /= 0) then
      if (rank == 0) then
        write (error_unit, '(a)') 'error: bad argument (expected --rounds N)'
        write (error_unit, '(a)') 'usage: ring [--rounds N]'
      end if
      call MPI_Finalize(ierr)
      call exit(2)
    end if
  end subroutine parse_args

  subroutine report(token, reference, total, matches, elapsed)
    integer(i8), intent(in) :: token, reference, total
    logical, intent(in) :: matches
    double precision, intent(in) :: elapsed
    character(len=5) :: verdict
    character(len=32) :: ms
    verdict = 'false'
    if (matches) verdict = 'true'
    ! f0.3 drops the leading zero of a value below 1, which JSON does not allow.
    write (ms, '(f0.3)') elapsed * 1000d0
    if (ms(1:1) == '.') ms = '0' // ms(1:len(ms) - 1)
    write (*, '(a,i0,a,i0,a,a,a,i0,a,a,a,i0,a,i0,a)') &
      '{"program":"ring","result":', token, ',"reference":', reference, &
      ',"matches_reference":', trim(verdict), ',"ranks":', nranks, &
      ',"elapsed_ms":', trim(ms), ',"rounds":', rounds, ',"allreduce":', total, &
      ',"language":"fortran"}'
    flush (6)
  end subroutine report

end program ring
