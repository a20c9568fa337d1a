// Private: the LAPACK routines kvrank and its benchmarks call, as OpenBLAS exports them (Fortran
// names and gfortran's conventions: every argument by pointer, a hidden trailing length for each
// character argument). Only where kvrank links OpenBLAS (KVRANK_HAVE_OPENBLAS); Debian's OpenBLAS
// ships no lapack.h of its own to include, and LAPACKE's wrappers would copy the matrices.
#pragma once

#ifdef KVRANK_HAVE_OPENBLAS
#include <cstddef>

extern "C" {
// The library's (metric/eigensolvers.cpp): eigenvalues, the generalized problem, Cholesky.
void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
            double* work, const int* lwork, int* info, std::size_t jobz_len, std::size_t uplo_len);
void dsygv_(const int* itype, const char* jobz, const char* uplo, const int* n, double* a,
            const int* lda, double* b, const int* ldb, double* w, double* work, const int* lwork,
            int* info, std::size_t jobz_len, std::size_t uplo_len);
void dsyevr_(const char* jobz, const char* range, const char* uplo, const int* n, double* a,
             const int* lda, const double* vl, const double* vu, const int* il, const int* iu,
             const double* abstol, int* m, double* w, double* z, const int* ldz, int* isuppz,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info,
             std::size_t jobz_len, std::size_t range_len, std::size_t uplo_len);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info,
             std::size_t uplo_len);
// dsygv's steps and the alternatives bench/eigs.cpp times against it.
void dsygst_(const int* itype, const char* uplo, const int* n, double* a, const int* lda,
             const double* b, const int* ldb, int* info, std::size_t uplo_len);
void dsytrd_(const char* uplo, const int* n, double* a, const int* lda, double* d, double* e,
             double* tau, double* work, const int* lwork, int* info, std::size_t uplo_len);
void dsterf_(const int* n, double* d, double* e, int* info);
void dpttrf_(const int* n, double* d, double* e, int* info);
void dlasq2_(const int* n, double* z, int* info);
void dgebrd_(const int* m, const int* n, double* a, const int* lda, double* d, double* e,
             double* tauq, double* taup, double* work, const int* lwork, int* info);
void dlasq1_(const int* n, double* d, double* e, double* work, int* info);
}
#endif
