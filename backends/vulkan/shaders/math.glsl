// Transcendentals GLSL lacks or gives too loosely: GLSL has no erf and no double exp/log/tanh/pow, its
// float pow is undefined for negative bases, and tanh written as a ratio of exps loses every
// digit near 0. Accurate to a few ulp; the conformance suite checks them against libm.

float Tanh32(float x) {
  if (isnan(x)) return x;
  const float a = abs(x);
  if (a > 9.0) return sign(x);
  float r;
  if (a < 0.55) {  // odd Taylor series; the next term is below 2^-25 relative
    const float x2 = a * a;
    r = a * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0 +
        x2 * (-1382.0 / 155925.0 + x2 * (21844.0 / 6081075.0 + x2 * (-929569.0 / 638512875.0))))))));
  } else {
    const float t = exp(-2.0 * a);
    r = (1.0 - t) / (1.0 + t);
  }
  return x < 0.0 ? -r : r;
}

// pow with the C library's special cases (pow(x, 0) = 1, pow(1, y) = 1, negative bases with
// integral exponents); LOG and EXP are the float or double log and exp.
#define DEFINE_POW(NAME, F, LOG, EXP, INF)                                        \
  F NAME(F x, F y) {                                                             \
    if (y == F(0) || x == F(1)) return F(1);                                     \
    if (isnan(x) || isnan(y)) return x + y;                                      \
    if (y == F(1)) return x;                                                     \
    if (y == F(2)) return x * x;                                                 \
    const bool integral = floor(y) == y;                                         \
    const bool odd = integral && abs(y) < F(9007199254740992.0) &&               \
                     mod(y, F(2)) == F(1);                                       \
    if (x == F(0)) {                                                             \
      if (y > F(0)) return odd ? x : F(0);                                       \
      return odd ? F(1) / x : INF;                                               \
    }                                                                            \
    if (x < F(0) && !integral) return (x - x) / (x - x);                         \
    if (y == F(0.5) && x > F(0)) return sqrt(x);                                 \
    const F r = EXP(y * LOG(abs(x)));                                            \
    return x < F(0) && odd ? -r : r;                                             \
  }

// erf(a) and erfc(a) for a >= 0: 2/sqrt(pi) e^(-a^2) sum_n (2a^2)^n a / (2n+1)!! below SMALL
// (positive terms: no cancellation; summed from the smallest by Horner), erfc's continued
// fraction e^(-a^2)/sqrt(pi) / (a + (1/2)/(a + 1/(a + (3/2)/(a + ...)))) above it; the other is
// 1 minus the one computed. a^2 is split exactly by fma so that e^(-a^2) keeps every digit.
// Past 30 erfc underflows in both widths. C is 1/sqrt(pi) in F. NAME(x) is erf, NAMEc(x) erfc.
#define DEFINE_ERF(NAME, F, EXP, SMALL, SERIES, CF, C)                           \
  F NAME##Pair(F a, out F c) {                                                   \
    if (a > F(30)) {                                                             \
      c = F(0);                                                                  \
      return F(1);                                                               \
    }                                                                            \
    const F h = a * a, l = fma(a, a, -h);                                        \
    const F e = EXP(-h) * (F(1) - l);                                            \
    if (a < F(SMALL)) {                                                          \
      const F t = F(2) * h;                                                      \
      F s = F(1);                                                                \
      for (int n = SERIES; n >= 1; --n) s = F(1) + s * t / F(2 * n + 1);         \
      const F r = F(2) * C * a * s * e;                                          \
      c = F(1) - r;                                                              \
      return r;                                                                  \
    }                                                                            \
    F f = a;                                                                     \
    for (int k = CF; k >= 1; --k) f = a + F(k) * F(0.5) / f;                     \
    c = C * e / f;                                                               \
    return F(1) - c;                                                             \
  }                                                                              \
  F NAME(F x) {                                                                  \
    if (isnan(x) || x == F(0)) return x; /* keeps the sign of -0 */              \
    F c;                                                                         \
    const F r = NAME##Pair(abs(x), c);                                           \
    return x < F(0) ? -r : r;                                                    \
  }                                                                              \
  F NAME##c(F x) {                                                               \
    if (isnan(x)) return x;                                                      \
    F c;                                                                         \
    const F r = NAME##Pair(abs(x), c);                                           \
    return x < F(0) ? F(1) + r : c;                                              \
  }

#ifdef F64
const double kLn2Hi = 6.93147180369123816490e-01LF;
const double kLn2Lo = 1.90821492927058770002e-10LF;

double Inf64() { return packDouble2x32(uvec2(0u, 0x7ff00000u)); }
double Nan64() { return packDouble2x32(uvec2(0u, 0x7ff80000u)); }

// e^r - 1 for |r| <= ln2/2, by its Taylor series (the 18th term is below 2^-60).
double Expm1Reduced(double r) {
  double term = r, sum = r;
  for (int k = 2; k <= 18; ++k) {
    term *= r / double(k);
    sum += term;
  }
  return sum;
}

double Exp64(double x) {
  if (isnan(x)) return x;
  if (x > 709.782712893384LF) return Inf64();
  if (x < -745.1332191019412LF) return 0.0LF;
  const double k = roundEven(x / (kLn2Hi + kLn2Lo));
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  const double e = 1.0LF + Expm1Reduced(r);
  // ldexp in two steps, so that 2^k for k near +-1074 never overflows on the way.
  const int ki = int(k);
  return ldexp(ldexp(e, ki / 2), ki - ki / 2);
}

double Expm1_64(double x) {
  if (abs(x) <= 0.3465LF) return Expm1Reduced(x);
  return Exp64(x) - 1.0LF;
}

double Log64(double x) {
  if (isnan(x) || x < 0.0LF) return Nan64();
  if (x == 0.0LF) return -Inf64();
  if (isinf(x)) return x;
  int e;
  double m = frexp(x, e);  // x = m * 2^e, m in [0.5, 1)
  if (m < 0.70710678118654752440LF) {
    m *= 2.0LF;
    e -= 1;
  }
  // log(m) = 2 atanh(f), f = (m - 1) / (m + 1), |f| <= 0.1716.
  const double f = (m - 1.0LF) / (m + 1.0LF), f2 = f * f;
  double term = f, sum = 0.0LF;
  for (int k = 1; k <= 41; k += 2) {
    sum += term / double(k);
    term *= f2;
  }
  return 2.0LF * sum + double(e) * kLn2Lo + double(e) * kLn2Hi;
}

double Tanh64(double x) {
  if (isnan(x)) return x;
  const double a = abs(x);
  if (a > 22.0LF) return sign(x);
  const double t = Expm1_64(-2.0LF * a);  // tanh(a) = -t / (2 + t)
  const double r = -t / (2.0LF + t);
  return x < 0.0LF ? -r : r;
}

DEFINE_POW(Pow64, double, Log64, Exp64, Inf64())
DEFINE_ERF(Erf64, double, Exp64, 2.0LF, 40, 50, 0.56418958354775628695LF)
#endif

float Exp32(float x) { return exp(x); }
float Log32(float x) { return log(x); }
DEFINE_POW(Pow32, float, Log32, Exp32, uintBitsToFloat(0x7f800000u))
DEFINE_ERF(Erf32, float, Exp32, 1.5, 15, 20, 0.56418958354775628695)
