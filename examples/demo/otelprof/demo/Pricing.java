package otelprof.demo;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.List;

/** Cart totals with per-category tax and volume discounts, in BigDecimal like real shops. */
final class Pricing {
    private Pricing() {}

    private static final BigDecimal HUNDRED = BigDecimal.valueOf(100);

    static BigDecimal taxRate(String category) {
        switch (category) {
            case "books":
                return new BigDecimal("0.07");
            case "music":
                return new BigDecimal("0.19");
            default:
                return new BigDecimal("0.16");
        }
    }

    static BigDecimal total(List<Catalog.Product> items, int[] quantities) {
        BigDecimal sum = BigDecimal.ZERO;
        for (int i = 0; i < items.size(); i++) {
            Catalog.Product p = items.get(i);
            BigDecimal line = BigDecimal.valueOf(p.priceCents).divide(HUNDRED, 2, RoundingMode.HALF_EVEN)
                    .multiply(BigDecimal.valueOf(quantities[i]));
            if (quantities[i] >= 3) {
                line = line.multiply(new BigDecimal("0.95")).setScale(2, RoundingMode.HALF_EVEN);
            }
            sum = sum.add(line.add(line.multiply(taxRate(p.category))).setScale(2, RoundingMode.HALF_EVEN));
        }
        return sum;
    }
}
